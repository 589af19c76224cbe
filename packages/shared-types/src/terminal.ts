/**
 * Terminal-safe text: what a remote end sent (a ping's or a webhook's response body, a probe's
 * reply) may hold ESC sequences that move the cursor, rewrite a title or hide a line when printed
 * to a terminal or a log viewed in one. Every control character (C0 but tab, DEL, C1) and the
 * Unicode bidirectional overrides are written as visible escapes: `\x1b`, `\u202e`, `\n`.
 */

// biome-ignore lint/suspicious/noControlCharactersInRegex: the point is to find them
const UNSAFE = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

function escaped(c: string): string {
  if (c === '\n') return '\\n';
  if (c === '\r') return '\\r';
  const code = c.charCodeAt(0);
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/** `text` with every control character escaped (see the module's comment); tabs stay. */
export function terminalSafe(text: string): string {
  return text.replace(UNSAFE, escaped);
}
