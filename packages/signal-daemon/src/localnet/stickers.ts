/**
 * Sticker packs (signal-cli's uploadStickerPack, addStickerPack, listStickerPacks, getSticker),
 * kept in the network file: a pack uploaded by one account is on the network for every account
 * that is given its URL (its pack id and key), as on Signal's servers. uploadStickerPack reads a
 * manifest.json (or a directory that holds one), and each sticker file it names next to it; every
 * path passes the attachment checks (absolute, inside --attachment-dir, size). A zip file is
 * refused: the embedded network reads a pack's manifest and files only.
 */
import { randomBytes } from 'node:crypto';
import { stat } from 'node:fs/promises';
import { dirname, isAbsolute, join, normalize, sep } from 'node:path';
import { RpcErrorCode } from '@vigil/shared-types';
import { readAttachmentFile } from '../attachments.js';
import { invalidParams, RpcFailure, userError } from '../errors.js';
import { optInt, type Params, reqString, strings } from '../params.js';
import type { NewStickerPack, StickerRow } from './extras.js';
import type { LocalContext, LocalMethods } from './methods.js';
import { contentTypeOf } from './sniff.js';

const URL_PREFIX = 'https://signal.art/addstickers/#';
/** What a manifest may hold at most (signal-cli's own limit of a pack is 200 stickers). */
const MAX_STICKERS = 200;

export const packUrl = (packId: string, packKey: string) => `${URL_PREFIX}pack_id=${packId}&pack_key=${packKey}`;

interface ManifestSticker {
  readonly file: string;
  readonly emoji: string;
  readonly contentType: string | null;
}

function manifestSticker(v: unknown, where: string): ManifestSticker {
  const o = (typeof v === 'object' && v !== null ? v : {}) as Record<string, unknown>;
  if (typeof o.file !== 'string' || o.file === '') throw userError(`Invalid sticker pack: ${where} has no file`);
  const file = normalize(o.file);
  if (isAbsolute(file) || file === '..' || file.startsWith(`..${sep}`)) {
    throw userError(`Invalid sticker pack: ${where}'s file must be a path inside the pack's directory`);
  }
  const contentType = typeof o.contentType === 'string' && o.contentType !== '' ? o.contentType : null;
  return { file, emoji: typeof o.emoji === 'string' ? o.emoji : '', contentType };
}

/** The manifest's path: the path given, or the manifest.json in the directory given. */
async function manifestPath(path: string): Promise<string> {
  if (!isAbsolute(path)) throw invalidParams('path must be the absolute path of a manifest.json or its directory');
  if (/\.zip$/i.test(path)) {
    throw userError(
      'Invalid sticker pack: zip files are not supported by the embedded network: give the manifest.json',
    );
  }
  const st = await stat(path).catch(() => null);
  return st?.isDirectory() ? join(path, 'manifest.json') : path;
}

/** A file of the pack, checked as an attachment is; a refusal names the `path` parameter. */
async function readPackFile(ctx: LocalContext, file: string): Promise<Buffer> {
  try {
    return await readAttachmentFile(file, ctx.attachmentPolicy);
  } catch (err) {
    if (err instanceof RpcFailure && err.rpcCode === RpcErrorCode.INVALID_PARAMS) {
      throw invalidParams(`path: ${err.message.replace(/^Invalid params: attachment /, 'sticker pack file ')}`);
    }
    throw err;
  }
}

/** Reads and checks the whole pack before anything is stored. */
async function readPack(ctx: LocalContext, path: string): Promise<NewStickerPack> {
  const manifest = await manifestPath(path);
  const text = (await readPackFile(ctx, manifest)).toString('utf8');
  let m: Record<string, unknown>;
  try {
    m = JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw userError('Invalid sticker pack: manifest.json is not JSON');
  }
  if (typeof m !== 'object' || m === null || !Array.isArray(m.stickers)) {
    throw userError('Invalid sticker pack: manifest.json has no stickers list');
  }
  if (m.stickers.length === 0 || m.stickers.length > MAX_STICKERS) {
    throw userError(`Invalid sticker pack: it must have 1 to ${MAX_STICKERS} stickers`);
  }
  const listed = m.stickers.map((s, i) => manifestSticker(s, `sticker ${i}`));
  const cover = m.cover === undefined || m.cover === null ? null : manifestSticker(m.cover, 'the cover');
  // The cover is one of the stickers, or one more after them.
  const all = cover && !listed.some((s) => s.file === cover.file) ? [...listed, cover] : listed;
  const stickers: (StickerRow & { data: Buffer })[] = [];
  for (const [id, s] of all.entries()) {
    const data = await readPackFile(ctx, join(dirname(manifest), s.file));
    stickers.push({ id, emoji: s.emoji, contentType: s.contentType ?? contentTypeOf(data), data });
  }
  return {
    packId: randomBytes(16).toString('hex'),
    packKey: randomBytes(32).toString('hex'),
    title: typeof m.title === 'string' ? m.title : '',
    author: typeof m.author === 'string' ? m.author : '',
    coverId: cover ? all.findIndex((s) => s.file === cover.file) : null,
    stickers,
  };
}

async function uploadStickerPack(ctx: LocalContext, p: Params): Promise<{ url: string }> {
  const pack = await readPack(ctx, reqString(p, 'path'));
  await ctx.store.write(() => ctx.extras.transaction(() => ctx.extras.addPack(ctx.me.number, pack)));
  return { url: packUrl(pack.packId, pack.packKey) };
}

/** A pack URL's id and key (signal.art or sgnl:// form). */
function parsePackUri(uri: string): { packId: string; packKey: string } {
  const id = /[#?&]pack_id=([0-9a-fA-F]+)/.exec(uri)?.[1];
  const key = /[#?&]pack_key=([0-9a-fA-F]+)/.exec(uri)?.[1];
  if (!id || !key)
    throw invalidParams(`uri must be a sticker pack URL (${URL_PREFIX}pack_id=…&pack_key=…), got ${uri}`);
  return { packId: id.toLowerCase(), packKey: key.toLowerCase() };
}

async function addStickerPack(ctx: LocalContext, p: Params): Promise<Record<string, never>> {
  const uris = strings(p, 'uri');
  if (uris.length === 0) throw invalidParams('uri is required');
  const packs = uris.map(parsePackUri);
  for (const { packId, packKey } of packs) {
    const pack = ctx.extras.pack(packId);
    if (!pack || pack.packKey !== packKey) throw userError(`Sticker pack not found: ${packId}`);
  }
  await ctx.store.write(() =>
    ctx.extras.transaction(() => {
      for (const { packId } of packs) ctx.extras.install(ctx.me.number, packId);
    }),
  );
  return {};
}

function listStickerPacks(ctx: LocalContext): unknown[] {
  return ctx.extras.installedPacks(ctx.me.number).map((pack) => {
    const stickers = ctx.extras.stickers(pack.packId);
    const shown = ({ id, emoji, contentType }: StickerRow) => ({ id, emoji, contentType });
    const cover = stickers.find((s) => s.id === pack.coverId);
    return {
      packId: pack.packId,
      url: packUrl(pack.packId, pack.packKey),
      installed: true,
      title: pack.title,
      author: pack.author,
      cover: cover ? shown(cover) : null,
      stickers: stickers.map(shown),
    };
  });
}

function getSticker(ctx: LocalContext, p: Params): { data: string } {
  const packId = reqString(p, 'packId');
  if (!/^[0-9a-fA-F]+$/.test(packId)) throw invalidParams(`packId must be a sticker pack id in hex, got ${packId}`);
  const stickerId = optInt(p, 'stickerId');
  if (stickerId === undefined) throw invalidParams('stickerId is required');
  const data = ctx.extras.sticker(packId.toLowerCase(), stickerId);
  if (!data) throw userError(`Could not find sticker with ID: ${stickerId} in pack ${packId}`);
  return { data: data.toString('base64') };
}

/** `send`'s sticker, `packId:stickerId` as signal-cli writes it: a sticker of a pack this account has installed. */
export function stickerRef(
  ctx: LocalContext,
  spec: string | undefined,
): { packId: string; stickerId: number } | undefined {
  if (spec === undefined) return undefined;
  const m = /^([0-9a-fA-F]+):(\d{1,9})$/.exec(spec);
  if (!m) throw invalidParams(`sticker must be stickerPackId:stickerId (hex pack id, sticker number), got ${spec}`);
  const packId = m[1]!.toLowerCase();
  const stickerId = Number(m[2]);
  const installed = ctx.extras.installedPacks(ctx.me.number).some((pk) => pk.packId === packId);
  if (!installed || !ctx.extras.sticker(packId, stickerId)) {
    throw userError(`Failed to send sticker: no sticker ${stickerId} in an installed pack ${packId}`);
  }
  return { packId, stickerId };
}

export const stickerMethods: LocalMethods = { uploadStickerPack, addStickerPack, listStickerPacks, getSticker };
