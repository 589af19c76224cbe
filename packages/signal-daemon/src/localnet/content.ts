/**
 * What a data message carries beyond its text, read from send's params with signal-cli's syntax:
 * text styles (`start:length:STYLE`), mentions (`start:length:recipient`), a quote, link previews.
 * Ranges count UTF-16 code units, as signal-cli's do. Keys without a value are left out.
 */
import type { Mention, Preview, Quote, TextStyle } from '@vigil/shared-types';
import { invalidParams } from '../errors.js';
import { numbers, optString, type Params, strings, timestamps } from '../params.js';
import type { LocalContext } from './methods.js';

const STYLES = new Set(['BOLD', 'ITALIC', 'SPOILER', 'STRIKETHROUGH', 'MONOSPACE']);

function range(name: string, spec: string, text: string | null): { start: number; length: number; rest: string } {
  const m = /^(\d+):(\d+):(.+)$/.exec(spec);
  if (!m) throw invalidParams(`${name} must be start:length:…, got ${JSON.stringify(spec)}`);
  const start = Number(m[1]);
  const length = Number(m[2]);
  if (text === null || start + length > text.length) {
    throw invalidParams(`${name} ${spec} is outside the message text`);
  }
  return { start, length, rest: m[3]! };
}

export function textStyles(name: string, specs: readonly string[], text: string | null): TextStyle[] {
  return specs.map((spec) => {
    const { start, length, rest } = range(name, spec, text);
    const style = rest.toUpperCase();
    if (!STYLES.has(style)) throw invalidParams(`${name} style must be one of ${[...STYLES].join(', ')}, got ${rest}`);
    return { style: style as TextStyle['style'], start, length };
  });
}

export function mentions(ctx: LocalContext, name: string, specs: readonly string[], text: string | null): Mention[] {
  return specs.map((spec) => {
    const { start, length, rest } = range(name, spec, text);
    const account = ctx.store.account(rest);
    if (!account) throw invalidParams(`${name} ${spec}: ${rest} is not a registered account`);
    return { name: ctx.displayName(rest), number: rest, uuid: account.uuid, start, length };
  });
}

/** The quote of an earlier message (signal-cli does not check that it exists; neither does this). */
export function quote(ctx: LocalContext, p: Params): Quote | undefined {
  const id = timestamps(p, 'quoteTimestamp')[0];
  const extras = ['quoteAuthor', 'quoteMessage', 'quoteMention', 'quoteTextStyle'].filter((k) => p[k] !== undefined);
  if (id === undefined) {
    if (extras.length > 0) throw invalidParams(`${extras[0]} needs quoteTimestamp`);
    return undefined;
  }
  const author = numbers(p, 'quoteAuthor')[0];
  if (author === undefined) throw invalidParams('quoteAuthor is required with quoteTimestamp');
  const text = optString(p, 'quoteMessage') ?? null;
  const ms = mentions(ctx, 'quoteMention', strings(p, 'quoteMention'), text);
  const styles = textStyles('quoteTextStyle', strings(p, 'quoteTextStyle'), text);
  return {
    id,
    author,
    authorNumber: author,
    authorUuid: ctx.store.account(author)?.uuid ?? null,
    text,
    ...(ms.length > 0 ? { mentions: ms } : {}),
    attachments: [],
    ...(styles.length > 0 ? { textStyles: styles } : {}),
  };
}

export function previews(p: Params): Preview[] {
  const url = optString(p, 'previewUrl');
  const title = optString(p, 'previewTitle');
  const description = optString(p, 'previewDescription');
  if (url === undefined) {
    if (title !== undefined || description !== undefined) throw invalidParams('previewTitle needs previewUrl');
    return [];
  }
  if (!/^https?:\/\/\S+$/.test(url)) throw invalidParams('previewUrl must be an http(s) URL');
  if (title === undefined) throw invalidParams('previewTitle is required with previewUrl');
  return [{ url, title, ...(description !== undefined ? { description } : {}) }];
}
