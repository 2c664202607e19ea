// Test extension: a page (externally_connectable) sends it small operations; it relays them
// to the native host cc.isaaclin.pedelec like the real Pedelec extension does, and reports
// what crosses the native port to the test's HTTP server on 127.0.0.1:<op.report>.
"use strict";

const HOST = "cc.isaaclin.pedelec";
const WITHOUT_ORIGIN = new Set(["ping", "list_providers", "get_settings"]);
let counter = 0;

// Long strings (the ~1 MiB events) are reported by their length only.
function shorten(value) {
  if (typeof value === "string") return value.length > 256 ? `<${value.length} chars>` : value;
  if (Array.isArray(value)) return value.map(shorten);
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, shorten(v)]));
  }
  return value;
}

function report(port, data) {
  if (!port) return;
  const body = JSON.stringify({ from: "extension", ...data });
  fetch(`http://127.0.0.1:${port}/report`, { method: "POST", body }).catch(() => {});
}

// The one native port all pages share after "connect_shared", as the real extension (0.4.6)
// keeps one port, and so one host process, for all its pages.
let shared = null;
const sharedPending = new Map(); // native requestId -> answer(fields) to its page's op

function sharedPort(reportPort) {
  if (shared) return shared;
  const port = chrome.runtime.connectNative(HOST);
  port.onMessage.addListener((message) => {
    const bytes = new TextEncoder().encode(JSON.stringify(message)).length;
    report(reportPort, { event: "native_message", bytes, message: shorten(message), shared: true });
    if (message.type === "response" && sharedPending.has(message.requestId)) {
      sharedPending.get(message.requestId)({ response: message });
      sharedPending.delete(message.requestId);
    }
  });
  port.onDisconnect.addListener(() => {
    const error = chrome.runtime.lastError ? chrome.runtime.lastError.message : null;
    report(reportPort, { event: "native_disconnect", error, shared: true });
    for (const answer of sharedPending.values()) answer({ error: `native port closed: ${error}` });
    sharedPending.clear();
    if (shared === port) shared = null;
  });
  shared = port;
  report(reportPort, { event: "native_connect", shared: true });
  return port;
}

chrome.runtime.onConnectExternal.addListener((page) => {
  const origin = page.sender.origin; // e.g. "http://localhost:8123"
  let native = null;
  let reportPort = 0;
  const pending = new Map(); // native requestId -> page op id

  const reply = (id, fields = {}) => page.postMessage({ kind: "reply", id, ...fields });

  function connect() {
    const port = chrome.runtime.connectNative(HOST);
    port.onMessage.addListener((message) => {
      const bytes = new TextEncoder().encode(JSON.stringify(message)).length;
      report(reportPort, { event: "native_message", bytes, message: shorten(message) });
      if (message.type === "response" && pending.has(message.requestId)) {
        reply(pending.get(message.requestId), { response: message });
        pending.delete(message.requestId);
      } else {
        page.postMessage({ kind: "native", message, bytes });
      }
    });
    port.onDisconnect.addListener(() => {
      const error = chrome.runtime.lastError ? chrome.runtime.lastError.message : null;
      report(reportPort, { event: "native_disconnect", error });
      page.postMessage({ kind: "native_disconnect", error });
      for (const id of pending.values()) reply(id, { error: `native port closed: ${error}` });
      pending.clear();
      if (native === port) native = null;
    });
    return port;
  }

  page.onMessage.addListener((op) => {
    reportPort = op.report;
    if (op.op === "hello") {
      reply(op.id, { origin });
    } else if (op.op === "connect") {
      native = connect();
      report(reportPort, { event: "native_connect" });
      reply(op.id);
    } else if (op.op === "connect_shared") {
      native = sharedPort(reportPort);
      reply(op.id);
    } else if (op.op === "open_tabs") {
      // Pages cannot open tabs without a user gesture; the extension can.
      Promise.all(op.urls.map((url) => chrome.tabs.create({ url, active: false }))).then(
        () => reply(op.id),
        (error) => reply(op.id, { error: String(error) }),
      );
    } else if (op.op === "disconnect") {
      if (native) native.disconnect(); // no onDisconnect fires for our own disconnect
      native = null;
      report(reportPort, { event: "native_disconnect_by_extension" });
      reply(op.id);
    } else if (op.op === "request") {
      if (!native) return reply(op.id, { error: "native port not connected" });
      // Like the real extension: payload fields, then type, then requestId, then callerOrigin.
      const requestId = `ext_${Date.now()}_${++counter}`;
      const message = { ...op.payload, type: op.type, requestId };
      if (!WITHOUT_ORIGIN.has(op.type)) message.callerOrigin = origin;
      if (native === shared) sharedPending.set(requestId, (fields) => reply(op.id, fields));
      else pending.set(requestId, op.id);
      report(reportPort, { event: "native_request", message: shorten(message) });
      native.postMessage(message);
    } else {
      reply(op.id, { error: `unknown op ${op.op}` });
    }
  });

  page.onDisconnect.addListener(() => {
    if (native && native !== shared) native.disconnect(); // the shared port serves others
    native = null;
  });
});
