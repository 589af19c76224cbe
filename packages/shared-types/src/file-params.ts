/**
 * Request parameters that name a file on the host. signal-cli (and the daemon, which follows it)
 * reads such a path itself, so a guest that may pass one reads the host's files and sends them
 * anywhere. The relay accepts these parameters from a guest only as `data:` URIs; the daemon, in
 * front of signal-cli, checks every such path as it checks an attachment before signal-cli reads it.
 */

/** How a parameter carries a file. */
export type FileParamKind =
  /** The whole value (or each string in a list) is a file path or a `data:` URI. */
  | 'file'
  /** `contentType[:filename[:previewFile]]`: what follows the second colon is a path or a `data:` URI. */
  | 'quote';

/**
 * Every parameter of the JSON-RPC interface that takes a file, by its command-line name, from
 * signal-cli 0.13.19's manual pages, signal-cli(1) and signal-cli-jsonrpc(5):
 * - `send --attachment` ("can be either a file path or a data URI"),
 * - `send --preview-image` ("the image file for the link preview"),
 * - `send --quote-attachment` (`contentType[:filename[:previewFile]]`, e.g. `image/png:test.png:/tmp/preview.jpg`),
 * - `updateGroup --avatar` ("a new group avatar image file") and `updateProfile --avatar` ("path to the new avatar image file"),
 * - `uploadStickerPack PATH` ("the path of the manifest.json or a zip file"),
 * - and in 0.14, `sendStory --attachment` (the same name as send's).
 * Not files: `send --sticker` (`stickerPackId:stickerId`), `addStickerPack --uri`, `getAttachment`,
 * `getAvatar` and `getSticker` (they return data); `--config` and `--log-file` are not JSON-RPC parameters.
 */
export const FILE_PARAMS: readonly { readonly name: string; readonly kind: FileParamKind }[] = [
  { name: 'attachment', kind: 'file' },
  { name: 'preview-image', kind: 'file' },
  { name: 'quote-attachment', kind: 'quote' },
  { name: 'avatar', kind: 'file' },
  { name: 'path', kind: 'file' },
];

const camel = (dashed: string) => dashed.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
const spellings = (dashed: string) => [...new Set([dashed, camel(dashed), dashed.replace(/-/g, '_')])];

/**
 * Every spelling of the parameters that signal-cli reads: it looks a parameter up by its dashed
 * name, then in camelCase, and a list parameter also with an `s` (`attachments`); the underscore
 * form is added for a daemon that reads it so. Each name maps to its kind.
 */
export const FILE_PARAM_KEYS: ReadonlyMap<string, FileParamKind> = new Map(
  FILE_PARAMS.flatMap(({ name, kind }) =>
    spellings(name)
      .flatMap((n) => [n, `${n}s`])
      .map((n) => [n, kind] as const),
  ),
);

/** The singular spellings of every file parameter: each key of FILE_PARAM_KEYS begins with one. */
export const FILE_PARAM_STEMS: readonly string[] = [...new Set(FILE_PARAMS.flatMap(({ name }) => spellings(name)))];

/** A `data:` URI, as signal-cli and the daemon tell one from a path: the prefix, exactly. */
export const isDataUri = (s: string): boolean => s.startsWith('data:');

/**
 * The host paths in one value of a file parameter: every string in it (in lists and objects at
 * any depth) that is a path rather than a `data:` URI; of a quote attachment, its preview file.
 */
export function pathsIn(value: unknown, kind: FileParamKind): string[] {
  if (typeof value === 'string') {
    if (kind === 'file') return isDataUri(value) ? [] : [value];
    const first = value.indexOf(':');
    const second = first < 0 ? -1 : value.indexOf(':', first + 1);
    const file = second < 0 ? null : value.slice(second + 1);
    return file === null || isDataUri(file) ? [] : [file];
  }
  if (typeof value === 'object' && value !== null) return Object.values(value).flatMap((v) => pathsIn(v, kind));
  return [];
}

/**
 * The file parameters in `params` that name files on the host, as spelled there, with their
 * paths: its own keys, as signal-cli reads them; with `nested`, also the keys of every object
 * inside (a filter that must not let a path through under any nesting).
 */
export function fileParamPaths(params: unknown, nested = false): { key: string; paths: string[] }[] {
  const found: { key: string; paths: string[] }[] = [];
  const visit = (v: unknown): void => {
    if (typeof v !== 'object' || v === null) return;
    for (const [key, value] of Object.entries(v)) {
      const kind = FILE_PARAM_KEYS.get(key);
      const paths = kind === undefined ? [] : pathsIn(value, kind);
      if (paths.length > 0) found.push({ key, paths });
      else if (nested) visit(value);
    }
  };
  visit(params);
  return found;
}

/**
 * The file parameters in one request's `params` (at any depth) whose value names a file on the
 * host rather than a `data:` URI, as the request spells them; empty when there are none.
 */
export function filePathParams(request: unknown): string[] {
  if (typeof request !== 'object' || request === null || Array.isArray(request)) return [];
  return fileParamPaths((request as Record<string, unknown>).params, true).map((f) => f.key);
}
