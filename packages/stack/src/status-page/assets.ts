/**
 * The page's two assets, served by the status page itself (nothing is fetched from elsewhere):
 * the style sheet and the script that keeps `<main>` live (Server-Sent Events, reconnecting on
 * its own after a restart of the stack) and sends the actions with the token.
 */

export const PAGE_CSS = `
:root{color-scheme:light dark;--ok:#1b7f3b;--bad:#b3261e;--warn:#8a5a00;--muted:#555;--line:#ccc}
@media (prefers-color-scheme:dark){:root{--ok:#6fd08c;--bad:#ff8a80;--warn:#ffc65c;--muted:#bbb;--line:#444}}
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:0 1rem 2rem}
header{display:flex;flex-wrap:wrap;gap:.5rem 2rem;align-items:baseline;border-bottom:1px solid var(--line)}
h1{font-size:1.4rem;margin:.6rem 0}h2{font-size:1.15rem;margin:1.4rem 0 .4rem}h3{font-size:1rem;margin:.8rem 0 .2rem}
table{border-collapse:collapse;width:100%}caption{text-align:left;color:var(--muted)}
th,td{border-bottom:1px solid var(--line);padding:.25rem .5rem;text-align:left;vertical-align:top}
dl{display:grid;grid-template-columns:repeat(auto-fill,minmax(16rem,1fr));gap:.3rem 1.5rem;margin:.4rem 0}
dt{font-weight:600}dd{margin:0}
.state-running,.check-ok{color:var(--ok)}.state-failed,.check-failed{color:var(--bad);font-weight:600}
.state-restarting,.state-stopped,.check-healed{color:var(--warn)}.check{white-space:nowrap;margin-right:.6rem}
.banner{border:3px solid var(--bad);padding:.2rem 1rem;margin:1rem 0}
.banner pre{white-space:pre-wrap;word-break:break-all}
figure{margin:.3rem 0}figcaption{color:var(--muted);font-size:.85rem}
svg{border:1px solid var(--line);display:block}
.probe.ok{fill:var(--ok)}.probe.failed{fill:var(--bad)}.probe.busy{fill:var(--muted)}
.probe.loading{fill:none;stroke:var(--warn);stroke-width:1}
.latency{fill:none;stroke:currentColor;stroke-width:1.5;vector-effect:non-scaling-stroke}
.mark{stroke-width:2;vector-effect:non-scaling-stroke}.mark.restart{stroke:var(--bad)}
.mark.fallback{stroke:var(--warn);stroke-dasharray:6 3}.mark.restored{stroke:var(--ok);stroke-dasharray:2 2}
.axis{font-size:10px;fill:var(--muted)}
form.action{display:inline}.actions{margin:.5rem 0}button{font:inherit;padding:.1rem .6rem}
.updated,#live{color:var(--muted);font-size:.85rem}
ul.consumers{margin:.2rem 0;padding-left:1.1rem}
`;

export const PAGE_JS = `'use strict';
(() => {
  const main = document.getElementById('main');
  const live = document.getElementById('live');
  const token = document.getElementById('token');
  const result = document.getElementById('action-result');
  const KEY = 'vigil-status-token';
  const fromHash = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (fromHash) {
    sessionStorage.setItem(KEY, decodeURIComponent(fromHash[1]));
    history.replaceState(null, '', location.pathname);
  }
  token.value = sessionStorage.getItem(KEY) || '';
  token.addEventListener('input', () => sessionStorage.setItem(KEY, token.value));
  document.getElementById('token-form').addEventListener('submit', (e) => e.preventDefault());

  let source = null;
  const connect = () => {
    source = new EventSource('/events');
    source.addEventListener('main', (e) => {
      main.innerHTML = e.data;
      live.textContent = 'Live: updated ' + new Date().toLocaleTimeString();
      live.dataset.state = 'live';
    });
    source.onerror = () => {
      live.textContent = 'Connection lost: reconnecting…';
      live.dataset.state = 'reconnecting';
      if (source.readyState === EventSource.CLOSED) setTimeout(connect, 1000);
    };
  };
  connect();

  document.addEventListener('submit', async (e) => {
    const form = e.target;
    if (!(form instanceof HTMLFormElement) || !form.classList.contains('action')) return;
    e.preventDefault();
    const what = form.querySelector('button').textContent;
    result.textContent = what + '…';
    try {
      const r = await fetch(form.action, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-vigil-token': token.value },
        body: '{}',
      });
      const body = await r.json().catch(() => ({}));
      result.textContent = what + ': ' + (r.ok ? 'done' : 'refused (' + r.status + ')') + (body.detail ? ' - ' + body.detail : body.error ? ' - ' + body.error : '');
    } catch (err) {
      result.textContent = what + ': no answer (' + err.message + ')';
    }
  });
})();
`;
