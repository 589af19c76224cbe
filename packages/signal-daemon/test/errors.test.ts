import { describe, expect, it } from '@jest/globals';
import { VigilError } from '@vigil/shared-types';
import { invalidParams, RpcFailure, userError } from '../src/errors.js';

describe('RpcFailure', () => {
  it("is a VigilError whose code is the catalogue's name of its JSON-RPC code, and its error object is unchanged", () => {
    const e = invalidParams('recipient is required');
    expect(e).toBeInstanceOf(VigilError);
    expect(e).toMatchObject({
      code: 'VIGIL_ERR_DAEMON_INVALID_PARAMS',
      rpcCode: -32602,
      exitCode: 1,
      name: 'RpcFailure',
    });
    expect(e.toObject()).toEqual({ code: -32602, message: 'Invalid params: recipient is required', data: null });
    expect(userError('Not registered', { number: '+1' }).toObject()).toEqual({
      code: -1,
      message: 'Not registered',
      data: { number: '+1' },
    });
    expect(new RpcFailure(-3, 'down').code).toBe('VIGIL_ERR_DAEMON_IO_ERROR');
    // A code that signal-cli invents keeps its number.
    const odd = new RpcFailure(-7, 'odd');
    expect(odd.code).toBe('VIGIL_ERR_DAEMON_RPC_OTHER');
    expect(odd.toObject()).toEqual({ code: -7, message: 'odd', data: null });
  });
});
