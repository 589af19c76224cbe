/** The file parameters of signal-cli's JSON-RPC interface: the paths in them, as the daemon checks them. */
import { describe, expect, it } from '@jest/globals';
import { fileParamPaths, pathsIn } from '../src/file-params.js';

const DATA = 'data:image/png;base64,AA==';

describe('pathsIn', () => {
  it('gives each path of a file parameter, in lists at any depth; a data: URI is none', () => {
    expect(pathsIn('/a', 'file')).toEqual(['/a']);
    expect(pathsIn([DATA, '/a', ['/b']], 'file')).toEqual(['/a', '/b']);
    expect(pathsIn(DATA, 'file')).toEqual([]);
    expect(pathsIn(42, 'file')).toEqual([]);
  });

  it('gives a quote attachment its preview file: what follows the second colon', () => {
    expect(pathsIn('image/png:x.png:/tmp/p.jpg', 'quote')).toEqual(['/tmp/p.jpg']);
    expect(pathsIn('image/png:x:y.png:/tmp/p.jpg', 'quote')).toEqual(['y.png:/tmp/p.jpg']);
    expect(pathsIn(`image/png:x.png:${DATA}`, 'quote')).toEqual([]);
    expect(pathsIn('image/png:x.png', 'quote')).toEqual([]);
    expect(pathsIn('image/png', 'quote')).toEqual([]);
  });
});

describe('fileParamPaths', () => {
  it('finds every spelling among the params, with its paths; other keys are not looked into unless nested', () => {
    const params = {
      attachments: ['/a', DATA],
      'preview-image': '/p',
      quote_attachment: 'text/plain:q.txt:/q',
      message: '/not/a/file/param',
      nested: { avatar: '/n' },
    };
    expect(fileParamPaths(params)).toEqual([
      { key: 'attachments', paths: ['/a'] },
      { key: 'preview-image', paths: ['/p'] },
      { key: 'quote_attachment', paths: ['/q'] },
    ]);
    expect(fileParamPaths(params, true)).toContainEqual({ key: 'avatar', paths: ['/n'] });
    expect(fileParamPaths({ path: DATA, avatar: [DATA] })).toEqual([]);
    expect(fileParamPaths(null)).toEqual([]);
    expect(fileParamPaths('x')).toEqual([]);
  });
});
