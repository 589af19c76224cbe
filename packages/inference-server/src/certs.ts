/**
 * Certificates for the mutual-TLS listener: a CA, a server certificate (localhost, 127.0.0.1,
 * ::1) and a client certificate, both signed by the CA. Keys are RSA 2048 made by Node's crypto;
 * certificates are built and signed (sha256) with node-forge. Keys are written 0600.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ensureDir, PRIVATE_DIR, PRIVATE_FILE, writeFileAtomic } from '@vigil/shared-types/node';
import forge from 'node-forge';
import { ConfigError } from './errors.js';

export const CERT_FILES = {
  caCert: 'ca.pem',
  caKey: 'ca-key.pem',
  serverCert: 'server.pem',
  serverKey: 'server-key.pem',
  clientCert: 'client.pem',
  clientKey: 'client-key.pem',
} as const;

export interface CertsOptions {
  readonly out: string;
  /** Validity in days (default 825). */
  readonly days?: number;
  /** Extra server names (DNS names or IP addresses) besides localhost, 127.0.0.1 and ::1. */
  readonly hosts?: readonly string[];
  readonly clientName?: string;
  readonly force?: boolean;
}

export interface CertsResult {
  readonly dir: string;
  readonly files: Record<keyof typeof CERT_FILES, string>;
}

interface KeyPair {
  readonly pem: string;
  readonly privateKey: forge.pki.rsa.PrivateKey;
  readonly publicKey: forge.pki.rsa.PublicKey;
}

function newKey(): KeyPair {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const priv = forge.pki.privateKeyFromPem(pem);
  const pub = forge.pki.setRsaPublicKey(priv.n, priv.e);
  return { pem, privateKey: priv, publicKey: pub };
}

const isIp = (h: string) => /^[\d.]+$/.test(h) || h.includes(':');

function certificate(options: {
  subject: string;
  key: KeyPair;
  issuer: { name: forge.pki.CertificateField[]; key: KeyPair } | null;
  days: number;
  extensions: unknown[];
}): forge.pki.Certificate {
  const cert = forge.pki.createCertificate();
  cert.publicKey = options.key.publicKey;
  // A positive serial: 16 random bytes with the top bit clear.
  const serial = randomBytes(16);
  serial[0] = serial[0]! & 0x7f;
  cert.serialNumber = serial.toString('hex');
  const now = new Date();
  cert.validity.notBefore = new Date(now.getTime() - 60 * 60 * 1000);
  cert.validity.notAfter = new Date(now.getTime() + options.days * 24 * 60 * 60 * 1000);
  const subject: forge.pki.CertificateField[] = [
    { name: 'commonName', value: options.subject },
    { name: 'organizationName', value: 'vigil' },
  ];
  cert.setSubject(subject);
  cert.setIssuer(options.issuer ? options.issuer.name : subject);
  cert.setExtensions(options.extensions as never[]);
  cert.sign(options.issuer ? options.issuer.key.privateKey : options.key.privateKey, forge.md.sha256.create());
  return cert;
}

/** Writes ca.pem, ca-key.pem, server.pem, server-key.pem, client.pem and client-key.pem into `out`. */
export async function generateCerts(options: CertsOptions): Promise<CertsResult> {
  const days = options.days ?? 825;
  ensureDir(options.out, PRIVATE_DIR);
  const files = Object.fromEntries(
    Object.entries(CERT_FILES).map(([k, f]) => [k, join(options.out, f)]),
  ) as CertsResult['files'];
  if (!options.force) {
    const existing = Object.values(files).filter((f) => existsSync(f));
    if (existing.length > 0) throw new ConfigError(`${existing[0]} exists: use --force to replace the certificates`);
  }
  const caKey = newKey();
  const caSubject = `vigil local CA ${randomBytes(4).toString('hex')}`;
  const ca = certificate({
    subject: caSubject,
    key: caKey,
    issuer: null,
    days,
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
      { name: 'subjectKeyIdentifier' },
    ],
  });
  const issuer = { name: ca.subject.attributes, key: caKey };
  const hosts = ['localhost', '127.0.0.1', '::1', ...(options.hosts ?? [])];
  const serverKey = newKey();
  const server = certificate({
    subject: 'localhost',
    key: serverKey,
    issuer,
    days,
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [...new Set(hosts)].map((h) => (isIp(h) ? { type: 7, ip: h } : { type: 2, value: h })),
      },
      { name: 'subjectKeyIdentifier' },
    ],
  });
  const clientKey = newKey();
  const client = certificate({
    subject: options.clientName ?? 'vigil-client',
    key: clientKey,
    issuer,
    days,
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', clientAuth: true },
      { name: 'subjectKeyIdentifier' },
    ],
  });
  const pem = (c: forge.pki.Certificate) => forge.pki.certificateToPem(c);
  const key = { mode: PRIVATE_FILE };
  const cert = { mode: 0o644 };
  writeFileAtomic(files.caKey, caKey.pem, key);
  writeFileAtomic(files.caCert, pem(ca), cert);
  writeFileAtomic(files.serverKey, serverKey.pem, key);
  writeFileAtomic(files.serverCert, pem(server), cert);
  writeFileAtomic(files.clientKey, clientKey.pem, key);
  writeFileAtomic(files.clientCert, pem(client), cert);
  return { dir: options.out, files };
}
