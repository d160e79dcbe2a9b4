// runcell dashboard: sign in, sessions with a streaming chat over /v1/stream, profiles, API tokens.
// No framework and no innerHTML with server data: every text goes through textContent.
"use strict";

const $ = (sel) => document.querySelector(sel);
const el = (tag, props = {}, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  for (const k of kids) if (k !== null && k !== undefined) e.append(k);
  return e;
};
const when = (iso) => (iso ? new Date(iso).toLocaleString() : "—");

async function api(method, path, body) {
  const res = await fetch(path, {
    method,
    credentials: "same-origin",
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  const data = text ? JSON.parse(text) : null;
  if (!res.ok) throw Object.assign(new Error(data?.error ?? res.statusText), { code: data?.code, status: res.status });
  return data;
}

const state = { me: null, profiles: [], session: null, socket: null, lastSeq: 0, prompts: new Map(), blocks: new Map(), tools: new Map(), running: null };

// ---------------------------------------------------------------------------------------------
// Sign-in

async function boot() {
  const session = await api("GET", "/api/auth/get-session").catch(() => null);
  if (!session) return showSignIn();
  state.me = session.user;
  $("#who").textContent = `${session.user.email}${session.user.role === "admin" ? " (admin)" : ""}`;
  $("#nav").hidden = false;
  $("#signout").hidden = false;
  show("chat");
  await loadProfiles();
  await loadSessions();
}

async function showSignIn() {
  $("#signin").hidden = false;
  const [setup, providers] = await Promise.all([api("GET", "/api/auth/setup").catch(() => null), api("GET", "/api/auth/providers").catch(() => ({ providers: [] }))]);
  $("#setup-hint").hidden = !setup?.setup_required;
  const box = $("#oauth");
  box.replaceChildren();
  for (const p of providers.providers) {
    box.append(
      el("button", {
        type: "button",
        onclick: async () => {
          const r = await api("POST", "/api/auth/sign-in/social", { provider: p, callbackURL: "/" }).catch((e) => ($("#signin-error").textContent = e.message));
          if (r?.url) location.href = r.url;
        },
      }, `Sign in with ${p === "github" ? "GitHub" : "Google"}`),
    );
  }
}

$("#signin-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const f = new FormData(e.target);
  try {
    await api("POST", "/api/auth/sign-in/email", { email: f.get("email"), password: f.get("password") });
    location.reload();
  } catch (err) {
    $("#signin-error").textContent = err.message;
  }
});

$("#signout").addEventListener("click", async () => {
  await api("POST", "/api/auth/sign-out").catch(() => {});
  location.reload();
});

// ---------------------------------------------------------------------------------------------
// Views

function show(view) {
  for (const id of ["chat", "profiles", "tokens"]) $(`#${id}`).hidden = id !== view;
  for (const b of document.querySelectorAll("#nav .tab")) b.classList.toggle("active", b.dataset.view === view);
  if (view === "profiles") loadProfiles();
  if (view === "tokens") loadTokens();
}
for (const b of document.querySelectorAll("#nav .tab")) b.addEventListener("click", () => show(b.dataset.view));

// ---------------------------------------------------------------------------------------------
// Profiles

async function loadProfiles() {
  const { data } = await api("GET", "/v1/profiles?limit=100");
  state.profiles = data;
  const select = $("#new-session select");
  select.replaceChildren(...data.map((p) => el("option", { value: p.id }, `${p.name} (${p.model.provider}/${p.model.name})`)));
  $("#profile-rows").replaceChildren(
    ...data.map((p) =>
      el("tr", {},
        el("td", {}, p.name),
        el("td", {}, `${p.model.provider} / ${p.model.name}${p.model.base_url ? ` @ ${p.model.base_url}` : ""}`),
        el("td", {}, p.image),
        el("td", {}, p.tools.join(", ")),
        el("td", {}, el("button", { onclick: async () => { if (confirm(`Delete profile ${p.name}?`)) { await api("DELETE", `/v1/profiles/${p.id}`); loadProfiles(); } } }, "Delete")),
      ),
    ),
  );
  if (data.length === 0) select.append(el("option", { value: "", disabled: "" }, "Create a profile first"));
}

$("#new-profile").addEventListener("submit", async (e) => {
  e.preventDefault();
  const f = new FormData(e.target);
  const model = { provider: f.get("provider") };
  for (const k of ["model", "base_url", "api_key_secret"]) if (f.get(k)) model[k === "model" ? "name" : k] = f.get(k);
  const body = { name: f.get("name"), model, network: f.get("network") };
  if (f.get("system_prompt")) body.system_prompt = f.get("system_prompt");
  try {
    await api("POST", "/v1/profiles", body);
    $("#profile-error").textContent = "";
    await loadProfiles();
  } catch (err) {
    $("#profile-error").textContent = err.message;
  }
});

// ---------------------------------------------------------------------------------------------
// API tokens

async function loadTokens() {
  const { data } = await api("GET", "/v1/api-tokens?limit=100");
  $("#token-rows").replaceChildren(
    ...data.map((t) =>
      el("tr", {}, el("td", {}, t.name), el("td", {}, when(t.created_at)), el("td", {}, when(t.last_used_at)),
        el("td", {}, el("button", { onclick: async () => { await api("DELETE", `/v1/api-tokens/${t.id}`); loadTokens(); } }, "Delete"))),
    ),
  );
}

$("#new-token").addEventListener("submit", async (e) => {
  e.preventDefault();
  try {
    const t = await api("POST", "/v1/api-tokens", { name: new FormData(e.target).get("name") });
    const box = $("#new-token-value");
    box.hidden = false;
    box.replaceChildren("Your new token (shown only now — copy it): ", el("code", {}, t.token));
    e.target.reset();
    loadTokens();
  } catch (err) {
    $("#token-error").textContent = err.message;
  }
});

// ---------------------------------------------------------------------------------------------
// Sessions and the stream

async function loadSessions() {
  const { data } = await api("GET", "/v1/sessions?limit=100");
  $("#sessions").replaceChildren(
    ...data.map((s) =>
      el("li", { class: s.id === state.session ? "active" : "", onclick: () => openSession(s.id) },
        s.title || "(new session)",
        el("small", {}, `${when(s.updated_at)} · ${s.status} · $${s.cost_usd.toFixed(4)}`)),
    ),
  );
}

$("#new-session").addEventListener("submit", (e) => {
  e.preventDefault();
  const profileId = new FormData(e.target).get("profile_id");
  if (!profileId) return show("profiles");
  resetTranscript();
  connect(null, (ws) => ws.send(JSON.stringify({ type: "session.start", profile_id: profileId })));
});

function resetTranscript() {
  state.blocks.clear();
  state.tools.clear();
  state.prompts.clear();
  state.running = null;
  state.lastSeq = 0;
  $("#transcript").replaceChildren();
  $("#cancel").hidden = true;
  $("#chat-error").textContent = "";
}

async function openSession(id) {
  resetTranscript();
  state.session = id;
  $("#composer").hidden = false;
  const { data } = await api("GET", `/v1/tasks?session_id=${id}&limit=100`);
  for (const t of data) state.prompts.set(t.id, t.prompt);
  connect(id, (ws) => ws.send(JSON.stringify({ type: "session.resume", session_id: id, after: 0 })));
  loadSessions();
}

/** One socket, authenticated by the session cookie; reconnects and resumes from the last seq. */
function connect(sessionId, onOpen) {
  if (state.socket) {
    state.socket.onclose = null;
    state.socket.close();
  }
  const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/v1/stream`);
  state.socket = ws;
  ws.onopen = () => onOpen(ws);
  ws.onmessage = (m) => onFrame(JSON.parse(m.data));
  ws.onclose = (ev) => {
    if (ev.code === 4001) return location.reload();
    if (state.socket !== ws || !state.session) return;
    const sid = state.session;
    setTimeout(() => connect(sid, (w) => w.send(JSON.stringify({ type: "session.resume", session_id: sid, after: state.lastSeq }))), 1000);
  };
}

function scrollDown() {
  const t = $("#transcript");
  t.scrollTop = t.scrollHeight;
}

/** The block of one task: its prompt, then the agent's output. */
function taskBlock(taskId) {
  let b = state.blocks.get(taskId);
  if (b) return b;
  const prompt = el("div", { class: "msg user" }, state.prompts.get(taskId) ?? "…");
  b = { root: el("div", { class: "task" }, prompt), text: null, prompt };
  state.blocks.set(taskId, b);
  $("#transcript").append(b.root);
  if (!state.prompts.has(taskId)) api("GET", `/v1/tasks/${taskId}`).then((t) => (prompt.textContent = t.prompt)).catch(() => {});
  return b;
}

function onFrame(f) {
  if (typeof f.seq === "number") state.lastSeq = Math.max(state.lastSeq, f.seq);
  if (f.type === "error") {
    $("#chat-error").textContent = `${f.code}: ${f.message}`;
    return;
  }
  if (f.type === "session.ready") {
    if (!state.session) {
      state.session = f.session_id;
      $("#composer").hidden = false;
      loadSessions();
    }
    $("#transcript").append(el("p", { class: "muted" }, `Workspace ${f.container_name} is ready.`));
    return;
  }
  if (!f.task_id) return;
  const b = taskBlock(f.task_id);
  switch (f.type) {
    case "task:token":
      setRunning(f.task_id);
      if (!b.text) b.root.append((b.text = el("div", { class: "msg agent streaming" })));
      b.text.textContent += f.text;
      break;
    case "task:tool_use": {
      setRunning(f.task_id);
      b.text = null;
      if (f.tool === "AskUserQuestion") break;
      const out = el("pre", {}, "running…");
      b.root.append(el("details", { class: "tool" }, el("summary", {}, `${f.tool}: ${summarize(f.input)}`), el("pre", {}, JSON.stringify(f.input, null, 2)), out));
      state.tools.set(f.tool_use_id, out);
      break;
    }
    case "task:tool_result": {
      const out = state.tools.get(f.tool_use_id);
      if (out) out.textContent = f.output;
      const ask = b.root.querySelector(`[data-ask="${f.task_id}"]`);
      if (f.tool === "AskUserQuestion" && ask) {
        ask.replaceChildren(el("span", { class: "muted" }, `Answered: ${f.output}`));
      }
      break;
    }
    case "task:ask_user":
      b.root.append(askCard(f));
      break;
    case "turn.done":
      for (const m of b.root.querySelectorAll(".msg.agent.streaming")) m.remove();
      b.text = null;
      b.root.append(el("div", { class: "msg agent" }, ...renderMarkdown(f.result_text), el("span", { class: "meta" }, `${f.input_tokens} in · ${f.output_tokens} out · $${Number(f.cost_usd).toFixed(4)}`)));
      break;
    case "task:done":
      if (f.status !== "completed") b.root.append(el("p", { class: "muted" }, `Task ${f.status}.`));
      done(f.task_id);
      break;
    case "task:failed":
      b.root.append(el("div", { class: "msg error" }, `${f.code ?? "FAILED"}: ${f.error}`));
      done(f.task_id);
      break;
  }
  scrollDown();
}

const summarize = (input) => {
  const v = input?.command ?? input?.file_path ?? input?.message ?? "";
  return String(v).slice(0, 80);
};

function setRunning(taskId) {
  state.running = taskId;
  $("#cancel").hidden = false;
}
function done(taskId) {
  if (state.running === taskId) state.running = null;
  $("#cancel").hidden = !state.running;
  loadSessions();
}

function askCard(f) {
  const box = el("div", { class: "msg ask", "data-ask": f.task_id });
  const send = (answer) => state.socket.send(JSON.stringify({ type: "task.answer", task_id: f.task_id, answer }));
  for (const q of f.questions) {
    box.append(el("strong", {}, q.question));
    box.append(el("div", { class: "options" }, ...q.options.map((o) => el("button", { type: "button", onclick: () => send(o.label) }, o.label))));
  }
  const input = el("input", { placeholder: "Or type an answer and press Enter" });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && input.value.trim()) send(input.value.trim());
  });
  box.append(input);
  return box;
}

/** Whether a URL points at this origin (the only images the CSP lets load: signed workspace files). */
const sameOrigin = (url) => {
  try {
    return new URL(url, location.href).origin === location.origin;
  } catch {
    return false;
  }
};

/**
 * Safe, minimal markdown: code fences, images (same-origin; one hosted elsewhere is shown as a link,
 * never fetched), links, text.
 */
function renderMarkdown(text) {
  const out = [];
  const parts = String(text ?? "").split(/^(```[^\n]*\n[\s\S]*?^```)$/m);
  for (const part of parts) {
    if (part.startsWith("```")) {
      out.push(el("pre", {}, part.replace(/^```[^\n]*\n/, "").replace(/\n?```$/, "")));
      continue;
    }
    const re = /(!?)\[([^\]]*)\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g;
    let last = 0;
    for (let m; (m = re.exec(part)); last = re.lastIndex) {
      out.push(part.slice(last, m.index));
      const url = m[3];
      const safe = /^(https?:\/\/|\/)/.test(url) && !url.startsWith("//");
      if (!safe) out.push(m[0]);
      else if (m[1] && sameOrigin(url)) out.push(el("img", { src: url, alt: m[2] }));
      else if (m[1]) out.push(el("a", { class: "external-image", href: url, target: "_blank", rel: "noopener noreferrer" }, `[image: ${m[2] || url}]`));
      else out.push(el("a", { href: url, target: "_blank", rel: "noopener noreferrer" }, m[2]));
    }
    out.push(part.slice(last));
  }
  return out;
}

$("#composer").addEventListener("submit", (e) => {
  e.preventDefault();
  const prompt = new FormData(e.target).get("prompt").trim();
  if (!prompt || !state.session) return;
  state.socket.send(JSON.stringify({ type: "session.turn", session_id: state.session, prompt }));
  e.target.reset();
});
$("#composer textarea").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) {
    e.preventDefault();
    $("#composer").requestSubmit();
  }
});
$("#cancel").addEventListener("click", () => {
  if (state.running) state.socket.send(JSON.stringify({ type: "task.cancel", task_id: state.running }));
});

boot().catch((e) => {
  document.body.append(el("p", { class: "error" }, `Could not load: ${e.message}`));
});
