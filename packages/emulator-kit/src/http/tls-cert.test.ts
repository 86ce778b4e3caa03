import { X509Certificate, createPrivateKey } from "node:crypto";
import { describe, expect, it } from "vitest";
import { generateSelfSignedCertificate } from "./tls-cert.js";

describe("generateSelfSignedCertificate", () => {
  it("makes a self-signed CA certificate for the hosts asked, valid from an hour ago", () => {
    const before = Date.now();
    const cert = generateSelfSignedCertificate({ hosts: ["localhost", "127.0.0.1", "::1", "api.example.test"], days: 2 });
    const x509 = new X509Certificate(cert.certPem);
    expect(x509.ca).toBe(true);
    expect(x509.verify(x509.publicKey)).toBe(true);
    expect(x509.checkPrivateKey(createPrivateKey(cert.keyPem))).toBe(true);
    expect(x509.subjectAltName).toBe("DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1, DNS:api.example.test");
    expect(x509.checkHost("api.example.test")).toBe("api.example.test");
    expect(x509.checkIP("127.0.0.1")).toBe("127.0.0.1");
    const from = Date.parse(x509.validFrom);
    expect(from).toBeLessThanOrEqual(before - 3_599_000);
    expect(Date.parse(x509.validTo) - from).toBe(2 * 86_400_000);
    expect(cert.fingerprint256).toBe(x509.fingerprint256);
  });

  // The serial is random: every first byte must still be minimal, positive DER. A masked top bit
  // alone gave 0x00 followed by a byte < 0x80 once in 256 certificates, which OpenSSL refuses.
  it("always encodes a serial OpenSSL accepts (2,000 certificates)", () => {
    for (let i = 0; i < 2_000; i += 1) {
      const x509 = new X509Certificate(generateSelfSignedCertificate().certPem);
      expect(x509.serialNumber).toMatch(/^[0-7][0-9A-F]/);
      expect(x509.serialNumber).not.toMatch(/^00/);
    }
  });

  it("names the option and the rule for bad input", () => {
    expect(() => generateSelfSignedCertificate({ hosts: [] })).toThrow("selfSigned hosts: must name at least one DNS name or IP address");
    expect(() => generateSelfSignedCertificate({ days: 0.5 })).toThrow("selfSigned days: must be an integer >= 1 (got 0.5)");
  });
});
