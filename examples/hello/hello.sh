#!/bin/sh
# Runs inside the sandbox: shows who and where it is, and writes a file that syncs back.
echo "hello from $(uname -n): uid $(id -u), cwd $(pwd)"
echo "network interfaces: $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " " | tr "\n" " ")"
if [ -e /root ]; then echo "/root is visible"; else echo "/root is not visible"; fi
date -u +"ran at %Y-%m-%dT%H:%M:%SZ" > ran-in-sandbox.txt
echo "wrote ran-in-sandbox.txt"
