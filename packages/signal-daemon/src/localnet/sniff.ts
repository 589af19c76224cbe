/** The content type of a file from its first bytes (as signal-cli probes it), else application/octet-stream. */

const SIGNATURES: readonly [type: string, offset: number, bytes: readonly number[]][] = [
  ['image/png', 0, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]],
  ['image/jpeg', 0, [0xff, 0xd8, 0xff]],
  ['image/gif', 0, [0x47, 0x49, 0x46, 0x38]],
  ['image/bmp', 0, [0x42, 0x4d]],
  ['application/pdf', 0, [0x25, 0x50, 0x44, 0x46, 0x2d]],
  ['application/zip', 0, [0x50, 0x4b, 0x03, 0x04]],
  ['application/gzip', 0, [0x1f, 0x8b]],
  ['audio/mpeg', 0, [0x49, 0x44, 0x33]],
  ['audio/ogg', 0, [0x4f, 0x67, 0x67, 0x53]],
  ['audio/flac', 0, [0x66, 0x4c, 0x61, 0x43]],
  ['video/webm', 0, [0x1a, 0x45, 0xdf, 0xa3]],
];

const ascii = (data: Buffer, from: number, to: number) => data.subarray(from, to).toString('latin1');

export function contentTypeOf(data: Buffer): string {
  for (const [type, offset, bytes] of SIGNATURES) {
    if (data.length >= offset + bytes.length && bytes.every((b, i) => data[offset + i] === b)) return type;
  }
  if (ascii(data, 0, 4) === 'RIFF') {
    const kind = ascii(data, 8, 12);
    if (kind === 'WEBP') return 'image/webp';
    if (kind === 'WAVE') return 'audio/wav';
    if (kind === 'AVI ') return 'video/x-msvideo';
  }
  if (ascii(data, 4, 8) === 'ftyp') {
    const brand = ascii(data, 8, 12);
    if (brand.startsWith('M4A')) return 'audio/mp4';
    if (brand === 'qt  ') return 'video/quicktime';
    if (brand === 'heic' || brand === 'heix') return 'image/heic';
    return 'video/mp4';
  }
  return 'application/octet-stream';
}
