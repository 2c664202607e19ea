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
      pending.set(requestId, op.id);
      report(reportPort, { event: "native_request", message: shorten(message) });
      native.postMessage(message);
    } else {
      reply(op.id, { error: `unknown op ${op.op}` });
    }
  });

  page.onDisconnect.addListener(() => {
    if (native) native.disconnect();
    native = null;
  });
});
