/**
 * The session gate: sshd runs it (ForceCommand) for every session, as the login user, with the
 * session's stdin, stdout and stderr. It carries them to the emulator over a unix socket and exits
 * with the status the emulator reports, so each session lands wherever the emulator puts it (a
 * sandbox jail) while sshd speaks the real protocol to the client.
 *
 * Perl without modules (perl-base is essential on Debian, and starts in ~3 ms where node needs
 * ~60): the gate's start-up is paid by every channel, multiplexed or not.
 *
 * Frames, both ways: type u8 | length u32be | payload.
 *   gate -> emulator: [PTY "<cols> <rows> <TERM>"] OPEN "host\0user\0" + ("1" + command | "0"),
 *                     STDIN bytes, STDIN_EOF, WINCH "<cols> <rows>"
 *   emulator -> gate: STDOUT bytes, STDERR bytes, EXIT "<code>" or "-<SIGNAL>"
 *
 * A session with a PTY (the client's pty-req, where sshd permits it) has sshd's terminal as the
 * gate's stdin and stdout: the gate puts it in raw mode (the terminal that matters is the one the
 * emulator opens where the command runs), sends its size first, and each window-change (sshd sets
 * the size, the kernel sends SIGWINCH) as a WINCH frame. When the client goes, sshd closes the
 * terminal and the hang-up ends the gate, so the session's command ends too, as with a real PTY.
 */
export const GATE_FRAME = { OPEN: 1, STDIN: 2, STDIN_EOF: 3, STDOUT: 4, STDERR: 5, EXIT: 6, PTY: 7, WINCH: 8 } as const;

export const GATE_SCRIPT = String.raw`#!/usr/bin/perl
# Paperclip emulator session gate (see @paperclip-sandbox/emulator-kit src/ssh/gate.ts).
use strict;
my ($path, $host) = @ARGV;
$SIG{PIPE} = 'IGNORE';
sub bail { syswrite(STDERR, "emulator ssh gate: $_[0]\n"); exit 255; }
# AF_UNIX = 1, SOCK_STREAM = 1 (Linux); no Socket module, to start fast.
socket(my $s, 1, 1, 0) or bail("socket: $!");
connect($s, pack("S a108", 1, $path)) or bail("the emulator is not answering ($!)");
binmode($s); binmode(STDIN); binmode(STDOUT); binmode(STDERR);
sub put {
  my ($fh, $data) = @_;
  my $off = 0;
  while ($off < length($data)) {
    my $n = syswrite($fh, $data, length($data) - $off, $off);
    if (!defined $n) { next if ($! + 0) == 4; return 0; }
    $off += $n;
  }
  return 1;
}
sub frame { put($s, pack("C N", $_[0], length($_[1])) . $_[1]) or exit 255; }
my $user = getpwuid($<) // "$<";
my $cmd = $ENV{SSH_ORIGINAL_COMMAND};
my $tty = -t STDIN;
my $winch = 0;
# TIOCGWINSZ (Linux): rows, cols.
sub winsize { my $ws = "\0" x 8; ioctl(STDIN, 0x5413, $ws) or return "0 0"; my ($r, $c) = unpack("S2", $ws); return "$c $r"; }
if ($tty) {
  require POSIX;
  my $t = POSIX::Termios->new();
  $t->getattr(0);
  $t->setiflag(0); $t->setoflag(0); $t->setlflag(0);
  $t->setcflag(($t->getcflag() & ~(POSIX::CSIZE() | POSIX::PARENB())) | POSIX::CS8());
  $t->setcc(POSIX::VMIN(), 1); $t->setcc(POSIX::VTIME(), 0);
  $t->setattr(0, POSIX::TCSANOW());
  $SIG{WINCH} = sub { $winch = 1; };
  frame(7, winsize() . " " . ($ENV{TERM} // ""));
}
frame(1, "$host\0$user\0" . (defined $cmd ? "1$cmd" : "0"));
my $in_open = 1;
my $buf = '';
# sshd is the parent: when it is gone (the connection dropped), so is the session.
my $sshd = getppid();
while (1) {
  if ($winch) { $winch = 0; frame(8, winsize()); }
  my $rin = '';
  vec($rin, fileno($s), 1) = 1;
  vec($rin, fileno(STDIN), 1) = 1 if $in_open;
  my $n = select(my $rout = $rin, undef, undef, 1.0);
  if ($n < 0) { next if ($! + 0) == 4; bail("select: $!"); }
  exit 255 if getppid() != $sshd;
  next if $n == 0;
  if ($in_open && vec($rout, fileno(STDIN), 1)) {
    my $r = sysread(STDIN, my $data, 65536);
    if (!defined $r) { next if ($! + 0) == 4; $r = 0; }
    if ($r == 0) { $in_open = 0; frame(3, ''); } else { frame(2, $data); }
  }
  next unless vec($rout, fileno($s), 1);
  my $r = sysread($s, $buf, 262144, length($buf));
  if (!defined $r) { next if ($! + 0) == 4; $r = 0; }
  bail("the emulator ended the session without an exit status") if $r == 0;
  while (length($buf) >= 5) {
    my ($type, $len) = unpack("C N", $buf);
    last if length($buf) < 5 + $len;
    my $data = substr($buf, 5, $len);
    substr($buf, 0, 5 + $len) = '';
    if ($type == 4) { put(\*STDOUT, $data) or exit 255; }
    elsif ($type == 5) { put(\*STDERR, $data) or exit 255; }
    elsif ($type == 6) {
      close(STDOUT); close(STDERR);
      if ($data =~ /^-([A-Z0-9]+)$/) { $SIG{$1} = 'DEFAULT'; kill($1, $$); exit 255; }
      exit($data + 0);
    }
  }
}
`;
