// Opens a page in Debian's Chromium (headless) over the DevTools protocol and reports what a person
// would see go wrong: console errors, uncaught exceptions, network requests, images that did not load.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const CHROMIUM = process.env['HPC_CHROMIUM'] ?? '/usr/bin/chromium';

export interface PageCheck {
  consoleErrors: string[];
  exceptions: string[];
  /** Every request the page made (file:// included). */
  requests: string[];
  images: { src: string; ok: boolean }[];
  title: string;
  screenshot: Buffer;
}

interface CdpMessage {
  id?: number;
  method?: string;
  params?: Record<string, unknown>;
  result?: Record<string, unknown>;
  error?: { message: string };
  sessionId?: string;
}

function startChromium(): Promise<{ proc: ChildProcess; ws: string; profile: string }> {
  const profile = mkdtempSync(join(tmpdir(), 'kdgat-chromium-'));
  const proc = spawn(
    CHROMIUM,
    [
      '--headless=new',
      '--no-sandbox', // tests run as root here
      '--disable-gpu',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--remote-debugging-port=0',
      `--user-data-dir=${profile}`,
      '--window-size=1200,900',
      'about:blank',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  return new Promise((res, rej) => {
    let err = '';
    const timer = setTimeout(() => rej(new Error(`chromium did not start in 30 s:\n${err}`)), 30_000);
    proc.on('error', (e) => rej(new Error(`${CHROMIUM}: ${e.message} (scripts/bootstrap.sh installs chromium)`)));
    proc.stderr!.setEncoding('utf8').on('data', (d: string) => {
      err += d;
      const m = /DevTools listening on (ws:\/\/\S+)/.exec(err);
      if (m) {
        clearTimeout(timer);
        res({ proc, ws: m[1]!, profile });
      }
    });
  });
}

export async function checkPage(url: string): Promise<PageCheck> {
  const { proc, ws, profile } = await startChromium();
  const socket = new WebSocket(ws);
  await new Promise((res, rej) => {
    socket.onopen = res;
    socket.onerror = () => rej(new Error(`could not connect to ${ws}`));
  });
  let next = 0;
  const pending = new Map<number, { res: (v: Record<string, unknown>) => void; rej: (e: Error) => void }>();
  const listeners: ((m: CdpMessage) => void)[] = [];
  socket.onmessage = (ev) => {
    const m = JSON.parse(String(ev.data)) as CdpMessage;
    if (m.id !== undefined && pending.has(m.id)) {
      const p = pending.get(m.id)!;
      pending.delete(m.id);
      if (m.error) p.rej(new Error(m.error.message));
      else p.res(m.result ?? {});
    } else for (const l of listeners) l(m);
  };
  const send = (method: string, params: Record<string, unknown> = {}, sessionId?: string) =>
    new Promise<Record<string, unknown>>((res, rej) => {
      const id = ++next;
      pending.set(id, { res, rej });
      socket.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
    });
  const check: PageCheck = { consoleErrors: [], exceptions: [], requests: [], images: [], title: '', screenshot: Buffer.alloc(0) };
  try {
    const { targetId } = (await send('Target.createTarget', { url: 'about:blank' })) as { targetId: string };
    const { sessionId } = (await send('Target.attachToTarget', { targetId, flatten: true })) as { sessionId: string };
    let loaded: () => void = () => {};
    const load = new Promise<void>((res) => (loaded = res));
    listeners.push((m) => {
      if (m.sessionId !== sessionId) return;
      const p = m.params ?? {};
      if (m.method === 'Runtime.consoleAPICalled' && (p['type'] === 'error' || p['type'] === 'assert'))
        check.consoleErrors.push(JSON.stringify(p['args']));
      if (m.method === 'Runtime.exceptionThrown') check.exceptions.push(JSON.stringify(p['exceptionDetails']));
      if (m.method === 'Log.entryAdded') {
        const e = p['entry'] as { level: string; text: string; url?: string };
        if (e.level === 'error') check.consoleErrors.push(`${e.text} ${e.url ?? ''}`);
      }
      if (m.method === 'Network.requestWillBeSent') check.requests.push((p['request'] as { url: string }).url);
      if (m.method === 'Page.loadEventFired') loaded();
    });
    for (const domain of ['Runtime', 'Log', 'Network', 'Page']) await send(`${domain}.enable`, {}, sessionId);
    await send('Page.navigate', { url }, sessionId);
    await Promise.race([load, new Promise((_, rej) => setTimeout(() => rej(new Error(`${url} did not load in 30 s`)), 30_000))]);
    const evaluate = async <T>(expression: string): Promise<T> =>
      ((await send('Runtime.evaluate', { expression, returnByValue: true }, sessionId)) as { result: { value: T } }).result.value;
    check.title = await evaluate<string>('document.title');
    check.images = await evaluate<{ src: string; ok: boolean }[]>(
      'Array.from(document.images).map((i) => ({ src: i.getAttribute("src"), ok: i.complete && i.naturalWidth > 0 }))',
    );
    const shot = (await send('Page.captureScreenshot', { format: 'png', captureBeyondViewport: false }, sessionId)) as { data: string };
    check.screenshot = Buffer.from(shot.data, 'base64');
    return check;
  } finally {
    socket.close();
    proc.kill('SIGTERM');
    await new Promise((res) => (proc.exitCode !== null ? res(null) : proc.once('exit', res)));
    rmSync(profile, { recursive: true, force: true });
  }
}
