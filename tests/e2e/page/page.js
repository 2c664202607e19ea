// Drives one scenario (?scenario=NAME) through the test extension (?ext=ID) and reports each
// step to the server that served this page (POST /report). The extension reports the native
// traffic itself, to 127.0.0.1:<report> (?report=PORT, passed to it in every message).
"use strict";

const params = new URLSearchParams(location.search);
const EXT_ID = params.get("ext");
const REPORT_PORT = Number(params.get("report"));
const SCENARIO = params.get("scenario");
const TIMEOUT_MS = 25000;

async function report(step, data = {}) {
  const body = JSON.stringify({ from: "page", scenario: SCENARIO, step, ...data });
  await fetch("/report", { method: "POST", body });
}

function result(response) {
  if (!response || !response.ok) throw new Error(`request failed: ${JSON.stringify(response)}`);
  return response.result;
}

// A chrome.runtime port to the extension, which owns the native port behind it.
class Extension {
  static async open() {
    const deadline = Date.now() + TIMEOUT_MS;
    for (;;) {
      try {
        // chrome.runtime appears (and the extension listens) only once the extension loaded.
        const ext = new Extension(chrome.runtime.connect(EXT_ID, { name: SCENARIO }));
        await ext.call({ op: "hello" }, 1000);
        return ext;
      } catch (error) {
        if (Date.now() > deadline) throw new Error(`extension not reachable: ${error}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  }

  constructor(port) {
    this.port = port;
    this.nextId = 0;
    this.replies = new Map(); // op id -> reply
    this.seen = []; // {kind: "native", message, bytes} and {kind: "native_disconnect", error}
    this.waiters = [];
    this.closed = false;
    port.onMessage.addListener((msg) => {
      if (msg.kind === "reply") this.replies.set(msg.id, msg);
      else this.seen.push(msg);
      this.wake();
    });
    port.onDisconnect.addListener(() => {
      this.closed = true;
      this.wake();
    });
  }

  wake() {
    const waiters = this.waiters;
    this.waiters = [];
    waiters.forEach((check) => check());
  }

  // Resolves with the first value of find() that is not undefined.
  until(find, what, timeoutMs = TIMEOUT_MS) {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), timeoutMs);
      const check = () => {
        const value = find();
        if (value !== undefined) {
          clearTimeout(timer);
          resolve(value);
        } else if (this.closed) {
          clearTimeout(timer);
          reject(new Error(`extension port closed while waiting for ${what}`));
        } else {
          this.waiters.push(check);
        }
      };
      check();
    });
  }

  async call(op, timeoutMs = TIMEOUT_MS) {
    const id = ++this.nextId;
    this.port.postMessage({ ...op, id, report: REPORT_PORT });
    const reply = await this.until(() => this.replies.get(id), op.op, timeoutMs);
    if (reply.error) throw new Error(`${op.op}: ${reply.error}`);
    return reply;
  }

  connectNative() {
    return this.call({ op: "connect" });
  }

  connectShared() {
    return this.call({ op: "connect_shared" });
  }

  disconnectNative() {
    return this.call({ op: "disconnect" });
  }

  async request(type, payload = {}) {
    return (await this.call({ op: "request", type, payload })).response;
  }

  // The first native message (not a response) matching predicate, as {message, bytes}.
  native(predicate, what) {
    return this.until(
      () => this.seen.find((m) => m.kind === "native" && predicate(m.message)),
      what,
    );
  }

  async event(threadId, predicate, what) {
    const isEvent = (m) => m.type === "thread_event" && m.event.threadId === threadId;
    return (await this.native((m) => isEvent(m) && predicate(m.event), what)).message.event;
  }
}

const TOOL = {
  name: "update_counter",
  description: "Adds delta to the page's counter and returns it.",
  argsSchema: {
    type: "object",
    properties: { delta: { type: "integer" } },
    required: ["delta"],
    additionalProperties: false,
  },
};

async function startThread(ext) {
  const skills = { guidance: "Pedelec e2e test page", tools: [TOOL] };
  const created = await ext.request("create_thread", { provider: "codex", skills });
  await report("create_thread", { response: created });
  const threadId = result(created).threadId;
  const subscribed = await ext.request("subscribe_thread", { threadId });
  await report("subscribe_thread", { response: subscribed, threadId });
  result(subscribed);
  return threadId;
}

const scenarios = {
  async lifecycle(ext) {
    await ext.connectNative();
    for (const type of ["ping", "list_providers", "get_settings"]) {
      await report(type, { response: await ext.request(type) });
    }
    const threadId = await startThread(ext);
    const sent = await ext.request("send_text", { threadId, message: "hello" });
    await report("send_text", { response: sent });
    const reply = await ext.event(threadId, (e) => e.type === "assistant_message", "the reply");
    await report("assistant_message", { event: reply });
    await report("end_thread", { response: await ext.request("end_thread", { threadId }) });
    await report("ended", { event: await ext.event(threadId, (e) => e.type === "ended", "ended") });
  },

  async tool(ext) {
    let counter = 0;
    await ext.connectNative();
    const threadId = await startThread(ext);
    const message = '/tool update_counter {"delta":2}';
    await report("send_text", { response: await ext.request("send_text", { threadId, message }) });
    const call = await ext.event(threadId, (e) => e.type === "tool_call", "tool_call");
    await report("tool_call", { event: call });
    counter += call.args.delta;
    const submitted = await ext.request("submit_tool_result", {
      threadId,
      toolRequestId: call.requestId,
      result: { counter },
    });
    await report("submit_tool_result", { response: submitted });
    const toolResult = await ext.event(threadId, (e) => e.type === "tool_result", "tool_result");
    await report("tool_result", { event: toolResult });
    const reply = await ext.event(threadId, (e) => e.type === "assistant_message", "the reply");
    await report("assistant_message", { event: reply });
    await ext.request("end_thread", { threadId });
  },

  // After subscribe_thread is reported, the test emits one event just under the 1 MiB frame
  // cap and one over it.
  async oversize(ext) {
    await ext.connectNative();
    const threadId = await startThread(ext);
    const isBig = (m) => m.type === "thread_event" && m.event.type === "assistant_message";
    const big = await ext.native(isBig, "the event just under 1 MiB");
    const event = big.message.event;
    await report("under_cap", { bytes: big.bytes, textLength: event.text.length, seq: event.seq });
    const isClosed = (m) => m.type === "thread_subscription_closed";
    await report("over_cap", { message: (await ext.native(isClosed, "the close")).message });
    const disconnects = ext.seen.filter((m) => m.kind === "native_disconnect");
    await report("ping_after", { response: await ext.request("ping"), disconnects });
  },

  // After subscribe_thread is reported, the test emits one event nested as deep as the host
  // relays and one nested a level deeper.
  async nesting(ext) {
    await ext.connectNative();
    const threadId = await startThread(ext);
    const deep = await ext.event(threadId, (e) => e.type === "assistant_message", "the deep event");
    let depth = 0;
    for (let value = deep.nested; Array.isArray(value); value = value[0]) depth += 1;
    await report("at_limit", { seq: deep.seq, nestedDepth: depth });
    const isClosed = (m) => m.type === "thread_subscription_closed";
    await report("past_limit", { message: (await ext.native(isClosed, "the close")).message });
    const disconnects = ext.seen.filter((m) => m.kind === "native_disconnect");
    await report("ping_after", { response: await ext.request("ping"), disconnects });
  },

  async disconnect(ext) {
    await ext.connectNative();
    await report("ping", { response: await ext.request("ping") });
    await ext.disconnectNative();
    await report("disconnected");
  },

  // Opens TABS more tabs of the "burst" scenario; they all share one native port.
  async tabs(ext) {
    const count = Number(params.get("tabs"));
    const urls = [];
    for (let tab = 0; tab < count; tab++) {
      const query = new URLSearchParams({ scenario: "burst", ext: EXT_ID, report: REPORT_PORT });
      query.set("tab", String(tab));
      query.set("burst", params.get("burst"));
      urls.push(`${location.origin}/?${query}`);
    }
    await ext.call({ op: "open_tabs", urls });
    await report("opened", { count });
  },

  // One tab of "tabs": BURST requests at once on the shared native port, reported together.
  async burst(ext) {
    await ext.connectShared();
    const count = Number(params.get("burst"));
    const responses = await Promise.all(
      Array.from({ length: count }, () => ext.request("list_providers")),
    );
    await report("burst", { tab: Number(params.get("tab")), responses });
  },

  // Ends with the second native port open; the test then looks at the host processes.
  async reconnect(ext) {
    await ext.connectNative();
    await report("first_ping", { response: await ext.request("ping") });
    await ext.disconnectNative();
    await ext.connectNative();
    await report("second_ping", { response: await ext.request("ping") });
  },
};

(async () => {
  try {
    if (!scenarios[SCENARIO]) throw new Error(`unknown scenario ${SCENARIO}`);
    const ext = await Extension.open();
    await scenarios[SCENARIO](ext);
    await report("done");
  } catch (error) {
    await report("failed", { error: String((error && error.stack) || error) });
  }
})();
