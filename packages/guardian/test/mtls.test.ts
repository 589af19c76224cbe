/**
 * Probes over mutual TLS (issue 18.4): the real inference server on the generated tiny model with
 * its plain listener off and only its mTLS listener on, certificates from its own `certs` command.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import { fixture } from './fixture.js';
import {
  baseConfig,
  checkedEvents,
  exited,
  freePort,
  guardian,
  NODE,
  nowS,
  runNode,
  sleep,
  writeJson,
} from './helpers.js';

const INFERENCE = fileURLToPath(new URL('../../inference-server/bin/inference-server.js', import.meta.url));
const fx = fixture();

describe('mutual TLS', () => {
  it('watches a server whose plain listener is off', async () => {
    const dir = fx.dir;
    const model = join(dir, 'tiny.gguf');
    const pki = join(dir, 'pki');
    await runNode([INFERENCE, 'make-model', '--preset', 'tiny', '--out', model]);
    await runNode([INFERENCE, 'certs', '--out', pki]);
    const port = await freePort();
    const server = spawn(
      NODE,
      [
        INFERENCE,
        'serve',
        '--model',
        model,
        '--model-id',
        'tiny',
        '--http',
        'off',
        '--mtls',
        `127.0.0.1:${port}`,
        '--tls-cert',
        join(pki, 'server.pem'),
        '--tls-key',
        join(pki, 'server-key.pem'),
        '--tls-ca',
        join(pki, 'ca.pem'),
        '--threads',
        '1',
      ],
      { stdio: 'ignore' },
    );
    try {
      const mtls = {
        address: `127.0.0.1:${port}`,
        cert: join(pki, 'client.pem'),
        key: join(pki, 'client-key.pem'),
        ca: join(pki, 'ca.pem'),
      };
      const plain = await freePort();
      // The model list on every tick: the tick that first serves checks it too, however long the load.
      const config = writeJson(
        join(dir, 'g.json'),
        baseConfig(dir, plain, { probeBudgetS: 20, modelListIntervalS: 0.001, primary: { mtls } }),
      );
      const t0 = nowS();
      // The server loads its model: until then the probe is refused or answered 503.
      const deadline = Date.now() + 60_000;
      const served = () => checkedEvents(join(dir, 'guardian.log'), t0).some((e) => e.event === 'probe_ok');
      while (!served() && Date.now() < deadline) {
        await guardian(['reset', '-c', config]);
        await guardian(['tick', '-c', config], {}, 30_000);
        if (!served()) await sleep(500);
      }
      const events = checkedEvents(join(dir, 'guardian.log'), t0).filter((e) => e.event.endsWith('_ok'));
      expect(events.map((e) => e.event)).toEqual(expect.arrayContaining(['model_list_ok', 'probe_ok']));
      // Without the client certificate the same server refuses the guardian (the handshake fails).
      const noCert = writeJson(
        join(dir, 'g2.json'),
        baseConfig(dir, plain, {
          stateFile: join(dir, 'state2.json'),
          logFile: join(dir, 'guardian2.log'),
          primary: { mtls: { ...mtls, cert: join(pki, 'server.pem'), key: join(pki, 'server-key.pem') } },
        }),
      );
      expect((await guardian(['tick', '-c', noCert])).code).toBe(0);
      expect(checkedEvents(join(dir, 'guardian2.log'), t0).map((e) => e.event)).toEqual(['probe_fail']);
    } finally {
      server.kill('SIGKILL');
      await exited(server);
    }
  }, 120_000);
});
