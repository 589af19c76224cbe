/**
 * A fake systemd notification socket for tests: a Unix datagram socket (Node has none, so a small
 * python3 process binds it) that records every message it receives, with the time it came.
 * `systemd-notify`'s own barrier messages (BARRIER=1, with a descriptor) are left out.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { until } from './support.js';

const SCRIPT = `
import json, os, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
print("bound", flush=True)
while True:
    data = s.recv(65536)
    for line in data.decode("utf-8", "replace").split("\\n"):
        if line and not line.startswith("BARRIER="):
            print(json.dumps({"t": time.time(), "m": line}), flush=True)
`;

export interface NotifyMessage {
  /** Unix time in seconds. */
  readonly t: number;
  /** One assignment: READY=1, WATCHDOG=1, STATUS=…. */
  readonly m: string;
}

export interface FakeNotifySocket {
  /** The path to put in NOTIFY_SOCKET. */
  readonly path: string;
  readonly messages: NotifyMessage[];
  close(): void;
}

export async function fakeNotifySocket(): Promise<FakeNotifySocket> {
  const dir = mkdtempSync(join(tmpdir(), 'vigil-notify-'));
  const path = join(dir, 'notify.sock');
  const child: ChildProcess = spawn('python3', ['-c', SCRIPT, path], { stdio: ['ignore', 'pipe', 'inherit'] });
  const messages: NotifyMessage[] = [];
  let bound = false;
  let buf = '';
  child.stdout!.on('data', (d: Buffer) => {
    buf += d;
    let i = buf.indexOf('\n');
    while (i >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (line === 'bound') bound = true;
      else if (line) messages.push(JSON.parse(line) as NotifyMessage);
      i = buf.indexOf('\n');
    }
  });
  await until('the fake notify socket to be bound', () => bound || child.exitCode !== null);
  if (!bound) throw new Error('python3 could not bind the fake notify socket');
  return {
    path,
    messages,
    close() {
      child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The times (Unix s) of the WATCHDOG=1 messages received. */
export const watchdogTimes = (s: FakeNotifySocket): number[] =>
  s.messages.filter((m) => m.m === 'WATCHDOG=1').map((m) => m.t);
