import { describe, expect, it } from '@jest/globals';
import {
  DAEMON_HTTP,
  DAEMON_TCP,
  envVarFor,
  FATAL_PATTERNS,
  FLOW_GATEWAY,
  findFatalPattern,
  GUARDIAN_EVENT_LEVEL,
  GUARDIAN_EVENTS,
  HEALTH_CHECKS,
  HealthExit,
  healthExitCode,
  INFERENCE_HTTP,
  INFERENCE_MTLS,
  isProbeSuccess,
  isSuccessLogLine,
  probeRequest,
  RELAY_LISTEN,
  RETIRED_PORTS,
  RpcErrorCode,
  SIGNAL_METHODS,
} from '../src/index.js';

describe('the contracts of DESIGN.md and the spec', () => {
  it('has the default listeners of DESIGN.md section 1', () => {
    expect([DAEMON_HTTP, DAEMON_TCP, INFERENCE_HTTP, INFERENCE_MTLS, FLOW_GATEWAY]).toEqual([
      { host: '127.0.0.1', port: 8080 },
      { host: '127.0.0.1', port: 7583 },
      { host: '127.0.0.1', port: 1337 },
      { host: '127.0.0.1', port: 1338 },
      { host: '127.0.0.1', port: 4077 },
    ]);
    expect(RELAY_LISTEN).toEqual({ host: '10.0.0.1', port: 7583 });
    expect(RETIRED_PORTS).toEqual([18081, 18082]);
  });

  it("has signal-cli's error codes", () => {
    expect(Object.values(RpcErrorCode).sort((a, b) => a - b)).toEqual([
      -32700, -32603, -32602, -32601, -32600, -5, -4, -3, -1,
    ]);
  });

  it('names every method, event and check once, checks in the order they run', () => {
    expect(new Set(SIGNAL_METHODS).size).toBe(14);
    expect(new Set(GUARDIAN_EVENTS).size).toBe(8);
    expect(Object.keys(GUARDIAN_EVENT_LEVEL).sort()).toEqual([...GUARDIAN_EVENTS].sort());
    expect(GUARDIAN_EVENT_LEVEL.binary_missing).toBe('error');
    expect(HEALTH_CHECKS[0]).toBe('signal_port');
    expect(HEALTH_CHECKS.at(-1)).toBe('outbound_send');
  });
});

describe('fatal patterns', () => {
  it('finds each pattern inside a longer log line and nothing in a clean one', () => {
    expect(FATAL_PATTERNS).toHaveLength(7);
    for (const p of FATAL_PATTERNS) {
      expect(findFatalPattern(`2026-01-01 ERROR [llama] ${p} (details)`)).toBe(p);
    }
    expect(findFatalPattern('request completed in 12 ms')).toBeNull();
    expect(findFatalPattern('segmentation fault')).toBeNull(); // patterns are case-sensitive, as logged
  });
});

describe('busy detection and probe', () => {
  it('recognises both backends success lines and not failures', () => {
    expect(isSuccessLogLine('{"level":"info","msg":"request completed","status":200}')).toBe(true);
    expect(isSuccessLogLine('127.0.0.1 - - [01/Jan/2026 10:00:00] "POST /v1/chat/completions HTTP/1.1" 200 -')).toBe(
      true,
    );
    expect(isSuccessLogLine('INFO:     127.0.0.1:5 - "POST /v1/chat/completions HTTP/1.1" 200 OK')).toBe(true);
    expect(isSuccessLogLine('127.0.0.1 - - "POST /v1/chat/completions HTTP/1.1" 500 -')).toBe(false);
    expect(isSuccessLogLine('127.0.0.1 - - "GET /v1/models HTTP/1.1" 200 -')).toBe(false);
    expect(isSuccessLogLine('"POST /v1/chat/completions HTTP/1.1" 2000')).toBe(false);
  });

  it('builds the spec probe and judges replies by the quoted content key', () => {
    expect(probeRequest('m')).toEqual({
      model: 'm',
      messages: [{ role: 'user', content: 'ping' }],
      max_tokens: 2,
      temperature: 0,
    });
    expect(isProbeSuccess('{"choices":[{"message":{"role":"assistant","content":"hi"}}]}')).toBe(true);
    expect(isProbeSuccess('content')).toBe(false);
    expect(isProbeSuccess('')).toBe(false);
  });
});

describe('healthExitCode and envVarFor', () => {
  it('maps statuses to the spec exit codes; skipped is not a failure', () => {
    expect(healthExitCode(['ok', 'skipped'])).toBe(HealthExit.HEALTHY);
    expect(healthExitCode(['ok', 'healed', 'skipped'])).toBe(HealthExit.HEALED);
    expect(healthExitCode(['healed', 'failed'])).toBe(HealthExit.MANUAL);
    expect(healthExitCode([])).toBe(0);
  });

  it('derives environment variable names from flags', () => {
    expect(envVarFor('signal-daemon', '--max-request-bytes')).toBe('SIGNAL_DAEMON_MAX_REQUEST_BYTES');
    expect(envVarFor('tcp-relay', 'listen')).toBe('TCP_RELAY_LISTEN');
  });
});
