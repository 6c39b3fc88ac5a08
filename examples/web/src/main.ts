// A product page on @searchd/client: it lists the organization's saved
// searches and starts one, so that however a start is repeated (a double
// click, a Retry after a timeout, a reload while the request is out), searchd
// admits one Run.
//
// The rule: one Idempotency-Key per user action. The key is minted when the
// user clicks Start, kept in sessionStorage until the start is answered, and
// sent on every attempt of that action: the client's own retries, the user's
// Retry, and the start the page resumes after a reload. searchd admits one
// Run per key and answers every repeat with that Run (200,
// Idempotent-Replayed: true).
import { SearchdClient, SearchdError, newIdempotencyKey, type SavedSearchSummary, type Started } from "@searchd/client";
import "./style.css";

interface Session {
  searchd: string;
  token: string;
  expiresAt: number;
  organization: string;
  user: string;
}

// The page's token comes from its own backend (/session), never from a
// secret in the page; it is fetched again a minute before it expires.
let session: Promise<Session> | undefined;
let sessionExpiresAt = 0;
function currentSession(): Promise<Session> {
  if (!session || sessionExpiresAt - 60_000 < Date.now()) {
    session = fetch("/session", { cache: "no-store" }).then(async (res) => {
      const body = await res.json();
      if (!res.ok) throw new Error(body.error ?? `/session answered ${res.status}`);
      sessionExpiresAt = body.expiresAt;
      return body as Session;
    });
    session.catch(() => (session = undefined));
  }
  return session;
}

let client: SearchdClient | undefined;
async function searchd(): Promise<SearchdClient> {
  const s = await currentSession();
  client ??= new SearchdClient({ baseUrl: s.searchd, token: async () => (await currentSession()).token });
  return client;
}

// The starts the user asked for and has not seen answered: saved search id
// to the action's key. sessionStorage outlives a reload of the tab.
const pendingKey = "searchd-example:pending-starts";
function pendingStarts(): Record<string, string> {
  try {
    return JSON.parse(sessionStorage.getItem(pendingKey) ?? "{}");
  } catch {
    return {};
  }
}
function setPending(id: string, key: string | undefined): void {
  const p = pendingStarts();
  if (key === undefined) delete p[id];
  else p[id] = key;
  sessionStorage.setItem(pendingKey, JSON.stringify(p));
}

// How long the page waits for a start's answer before it offers Retry
// (?timeoutMs=N, for trying it out).
const answerTimeoutMs = Number(new URLSearchParams(location.search).get("timeoutMs") ?? 15_000);

const list = document.querySelector<HTMLUListElement>("#list")!;
const who = document.querySelector<HTMLParagraphElement>("#who")!;
const notice = document.querySelector<HTMLParagraphElement>("#notice")!;
const inFlight = new Set<string>();

function el<K extends keyof HTMLElementTagNameMap>(tag: K, props: Partial<HTMLElementTagNameMap[K]> = {}, ...children: (Node | string)[]) {
  const e = Object.assign(document.createElement(tag), props);
  e.append(...children);
  return e;
}

function row(ss: SavedSearchSummary): HTMLLIElement {
  const button = el("button", { className: "start", type: "button", textContent: "Start" });
  button.dataset.start = ss.id;
  // One click is one action. The second click of a double click (detail 2)
  // is part of the first; the button is also disabled while a start is out.
  button.addEventListener("click", (e) => {
    if (e.detail > 1 || inFlight.has(ss.id)) return;
    const key = newIdempotencyKey();
    setPending(ss.id, key);
    void start(ss.id, key, false);
  });
  const status = el("p", { className: "status" });
  status.dataset.status = ss.id;
  const li = el(
    "li",
    { className: "card" },
    el("div", { className: "info" }, el("h2", { textContent: ss.name }), el("p", { className: "query", textContent: ss.query }),
      el("p", { className: "meta", textContent: `version ${ss.version} · ${ss.baseline_items} baseline item${ss.baseline_items === 1 ? "" : "s"}` })),
    button,
    status,
  );
  li.dataset.id = ss.id;
  return li;
}

function parts(id: string): { button: HTMLButtonElement; status: HTMLParagraphElement } {
  return {
    button: list.querySelector<HTMLButtonElement>(`button[data-start="${id}"]`)!,
    status: list.querySelector<HTMLParagraphElement>(`p[data-status="${id}"]`)!,
  };
}

async function start(id: string, key: string, resumed: boolean): Promise<void> {
  if (inFlight.has(id)) return;
  inFlight.add(id);
  const { button, status } = parts(id);
  button.disabled = true;
  status.className = "status busy";
  status.replaceChildren(resumed ? "Resuming the start you made before the reload…" : "Starting…");
  try {
    const c = await searchd();
    const started = await c.startSavedSearch(id, { max_results: 10 }, { idempotencyKey: key, signal: AbortSignal.timeout(answerTimeoutMs) });
    setPending(id, undefined);
    showRun(id, started, resumed);
  } catch (err) {
    showFailure(id, key, err);
  } finally {
    inFlight.delete(id);
    button.disabled = false;
  }
}

function showRun(id: string, s: Started, resumed: boolean): void {
  const { status } = parts(id);
  status.className = "status ok";
  status.dataset.run = s.run.id;
  status.dataset.replayed = String(s.replayed);
  const how = s.created ? "a new Run" : resumed ? "the Run your start before the reload made" : "the Run this start already made";
  // The id's last 8 characters: its first 8 are the minute it was minted
  // (a time-ordered UUID), shared by every Run of that minute.
  const live = el("strong", { className: "run-status", textContent: s.run.status });
  status.dataset.runStatus = s.run.status;
  status.replaceChildren(`Run …`, el("code", { textContent: s.run.id.slice(-8) }), " ", live, `: ${how}.`);
  status.title = `Run ${s.run.id}, key ${s.idempotencyKey}`;
  void follow(id, s.run.id, s.run.version, live);
}

// The stream each row follows, stopped when the row shows another Run.
const following = new Map<string, AbortController>();

// follow sets the row's status from each event of Run runId after version
// seq (the version the start answered), until the Run finishes.
async function follow(id: string, runId: string, seq: number, live: HTMLElement): Promise<void> {
  following.get(id)?.abort();
  const stop = new AbortController();
  following.set(id, stop);
  const { status } = parts(id);
  try {
    for await (const e of (await searchd()).followRun(runId, { lastEventId: seq, signal: stop.signal })) {
      live.textContent = e.status;
      status.dataset.runStatus = e.status;
      if (e.type === "run.failed" && e.error) live.title = e.error.message ?? e.error.code;
    }
  } catch (err) {
    if (!stop.signal.aborted) live.title = `No longer following this Run: ${err instanceof Error ? err.message : String(err)}`;
  } finally {
    if (following.get(id) === stop) following.delete(id);
  }
}

function showFailure(id: string, key: string, err: unknown): void {
  const { status } = parts(id);
  const final = err instanceof SearchdError && err.status >= 400 && err.status < 500;
  status.className = "status error";
  if (final) {
    // searchd refused the start itself: repeating the key repeats the refusal.
    setPending(id, undefined);
    status.replaceChildren(`Not started: ${err.problem?.detail ?? err.message}`);
    return;
  }
  const why = err instanceof DOMException && err.name === "TimeoutError" ? `No answer after ${answerTimeoutMs / 1000} s.` : `No answer (${String(err)}).`;
  const retry = el("button", { className: "retry", type: "button", textContent: "Retry" });
  retry.addEventListener("click", () => void start(id, key, false));
  status.replaceChildren(`${why} Retry sends the same start again, so it cannot make a second Run. `, retry);
}

async function load(): Promise<void> {
  try {
    const s = await currentSession();
    who.textContent = `Signed in as ${s.user} · organization ${s.organization}`;
    const page = await (await searchd()).listSavedSearches({ limit: 50 });
    list.replaceChildren(...page.items.map(row));
    if (page.items.length === 0) list.replaceChildren(el("li", { className: "empty", textContent: "No saved searches yet." }));
  } catch (err) {
    notice.hidden = false;
    notice.className = "error";
    notice.textContent = `Could not load the saved searches: ${err instanceof Error ? err.message : String(err)}`;
    return;
  }
  // A start whose answer the reload cut off: send it again with its key.
  for (const [id, key] of Object.entries(pendingStarts())) {
    if (list.querySelector(`li[data-id="${id}"]`)) void start(id, key, true);
    else setPending(id, undefined);
  }
}

void load();
