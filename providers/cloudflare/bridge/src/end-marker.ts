/**
 * Finds `ESC ] paperclip-exit;<nonce>;<status> BEL` in the output stream, across frame boundaries:
 * bytes that may begin it are held back until the next frame tells.
 */
export class EndMarker {
  private carry = new Uint8Array(0);
  private readonly prefix: Uint8Array;
  constructor(nonce: string) {
    this.prefix = new TextEncoder().encode(`\x1b]paperclip-exit;${nonce};`);
  }

  scan(bytes: Uint8Array): { out: Uint8Array; exitCode?: number } {
    const buf = concat(this.carry, bytes);
    this.carry = new Uint8Array(0);
    const at = indexOf(buf, this.prefix);
    if (at >= 0) {
      const rest = buf.subarray(at + this.prefix.length);
      const bell = rest.indexOf(0x07);
      if (bell < 0) {
        if (rest.length <= 8) {
          this.carry = buf.slice(at);
          return { out: buf.slice(0, at) };
        }
        return { out: buf };
      }
      const digits = new TextDecoder().decode(rest.subarray(0, bell));
      if (/^\d{1,3}$/.test(digits)) return { out: buf.slice(0, at), exitCode: Number(digits) };
      return { out: buf };
    }
    // Hold back a tail that is the start of the marker.
    for (let keep = Math.min(this.prefix.length - 1, buf.length); keep > 0; keep -= 1) {
      if (startsWith(this.prefix, buf.subarray(buf.length - keep))) {
        this.carry = buf.slice(buf.length - keep);
        return { out: buf.slice(0, buf.length - keep) };
      }
    }
    return { out: buf };
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) return b;
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

function startsWith(whole: Uint8Array, part: Uint8Array): boolean {
  for (let i = 0; i < part.length; i += 1) if (whole[i] !== part[i]) return false;
  return true;
}

function indexOf(haystack: Uint8Array, needle: Uint8Array): number {
  outer: for (let i = 0; i + needle.length <= haystack.length; i += 1) {
    for (let j = 0; j < needle.length; j += 1) if (haystack[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}
