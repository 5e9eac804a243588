// A real MCP client, the official TypeScript SDK's, driven by a Go test over
// JSON lines: each line on stdin is an operation {"id", "op", ...}; each
// answer is one line on stdout {"id", "result"} or {"id", "error"}, and what
// the client saw on its own (progress, notifications, transport errors) is a
// line {"event", ...}. Operations run concurrently, so a test can start a
// call that waits for a person and approve it meanwhile.
//
//   connect  {transport: "stdio", command, args} | {transport: "http", url, token, origin}
//            and version: the protocol version the initialize request offers
//            (the SDK offers its latest; any of SUPPORTED_PROTOCOL_VERSIONS, or
//            another string, is put in its place)
//   list     tools/list through the SDK (paginated)
//   schemas  every listed tool's inputSchema checked as strict validators and
//            model providers need it (see checkSchema)
//   call     {name, arguments, progress: bool, cancelOnProgress: bool, timeoutMs}
//   ping, request {method, params}, terminate (HTTP DELETE), close
//   log      what the client observed: transport errors, notifications,
//            every HTTP exchange (method, status, headers), the server's stderr
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema, LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS, ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import Ajv from 'ajv';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { z } from 'zod';
import readline from 'node:readline';

const out = (v) => process.stdout.write(JSON.stringify(v) + '\n');
const state = { client: null, transport: null, tools: [], errors: [], notifications: [], http: [], stderr: '', calls: new Map(), init: null };

// Wraps the SDK's transport: rewrites the initialize request's protocol
// version and keeps the initialize response, nothing else.
class Offering {
  constructor(inner, version) { this.inner = inner; this.version = version; }
  async start() {
    this.inner.onmessage = (m, extra) => {
      if (m.id !== undefined && m.id === this.initID) state.init = m;
      this.onmessage?.(m, extra);
    };
    this.inner.onerror = (e) => this.onerror?.(e);
    this.inner.onclose = () => this.onclose?.();
    return this.inner.start();
  }
  send(m, opts) {
    if (m.method === 'initialize') {
      this.initID = m.id;
      if (this.version) m.params.protocolVersion = this.version;
    }
    return this.inner.send(m, opts);
  }
  close() { return this.inner.close(); }
  setProtocolVersion(v) { this.inner.setProtocolVersion?.(v); }
  get sessionId() { return this.inner.sessionId; }
}

async function connect(op) {
  let inner;
  if (op.transport === 'stdio') {
    inner = new StdioClientTransport({ command: op.command, args: op.args ?? [], env: op.env, stderr: 'pipe' });
    inner.stderr.on('data', (d) => { state.stderr += d; });
  } else {
    const headers = {};
    if (op.token) headers.Authorization = 'Bearer ' + op.token;
    if (op.origin) headers.Origin = op.origin;
    const logged = async (url, init) => {
      const res = await fetch(url, init);
      const h = new Headers(init?.headers);
      state.http.push({
        method: init?.method ?? 'GET', status: res.status,
        sent: { session: h.get('mcp-session-id'), protocol: h.get('mcp-protocol-version'), accept: h.get('accept') },
        got: { session: res.headers.get('mcp-session-id'), type: res.headers.get('content-type'), authenticate: res.headers.get('www-authenticate') },
      });
      return res;
    };
    inner = new StreamableHTTPClientTransport(new URL(op.url), { requestInit: { headers }, fetch: logged });
  }
  const transport = new Offering(inner, op.version);
  const client = new Client({ name: 'gatehouse-e2e-ts', version: '1.0.0' }, { capabilities: {} });
  client.onerror = (e) => { state.errors.push(String(e?.message ?? e)); out({ event: 'error', message: String(e?.message ?? e) }); };
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => { state.notifications.push('notifications/tools/list_changed'); });
  await client.connect(transport);
  state.client = client;
  state.transport = transport;
  return {
    serverInfo: client.getServerVersion(), capabilities: client.getServerCapabilities(), instructions: client.getInstructions(),
    protocolVersion: state.init?.result?.protocolVersion, sessionId: transport.sessionId,
    offered: op.version ?? LATEST_PROTOCOL_VERSION, sdkVersions: SUPPORTED_PROTOCOL_VERSIONS,
  };
}

async function list() {
  const tools = [];
  let cursor;
  do {
    const page = await state.client.listTools(cursor ? { cursor } : {});
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  state.tools = tools;
  return { tools };
}

// checkSchema lists what a strict validator (ajv in strict mode, the draft
// the schema names or 2020-12, the MCP default) or a model provider's tool
// API would refuse in a tool's inputSchema.
function checkSchema(tool) {
  const problems = [];
  const s = tool.inputSchema;
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(tool.name)) problems.push('name is not 1-64 of [A-Za-z0-9_-] (model providers refuse it)');
  if (!tool.description) problems.push('no description');
  if (!s || typeof s !== 'object' || Array.isArray(s)) return [...problems, 'inputSchema is not an object'];
  if (s.type !== 'object') problems.push(`top-level type is ${JSON.stringify(s.type)}, not "object"`);
  for (const bad of ['oneOf', 'anyOf', 'allOf', 'not', 'enum']) if (bad in s) problems.push(`top-level ${bad} (model providers refuse it)`);
  const props = s.properties ?? {};
  for (const r of s.required ?? []) if (!(r in props)) problems.push(`required ${r} is not a property`);
  if (new Set(s.required ?? []).size !== (s.required ?? []).length) problems.push('required lists a name twice');
  const seen = new Set();
  const walk = (node, path) => {
    if (!node || typeof node !== 'object') return;
    if (seen.has(node)) { problems.push(`${path}: a cycle`); return; }
    seen.add(node);
    if (typeof node.$ref === 'string') {
      if (!node.$ref.startsWith('#')) problems.push(`${path}: $ref ${node.$ref} leaves the schema`);
      else if (node.$ref === '#' || path.startsWith(node.$ref.slice(1))) problems.push(`${path}: $ref ${node.$ref} loops`);
    }
    if (node.type === 'object' && node.properties) for (const r of node.required ?? []) if (!(r in node.properties)) problems.push(`${path}: required ${r} is not a property`);
    for (const [k, v] of Object.entries(node)) if (v && typeof v === 'object') walk(v, path + '/' + k);
    seen.delete(node);
  };
  walk(s, '#');
  const draft7 = typeof s.$schema === 'string' && s.$schema.includes('draft-07');
  const A = draft7 ? Ajv : Ajv2020;
  const ajv = new A({ strict: true, strictTypes: true, strictTuples: true, strictRequired: true, allErrors: true, logger: false });
  addFormats(ajv);
  try { ajv.compile(s); } catch (e) { problems.push('ajv strict: ' + e.message); }
  return problems;
}

async function call(op) {
  const ac = new AbortController();
  const opts = { signal: ac.signal, timeout: op.timeoutMs ?? 120000 };
  if (op.progress) {
    opts.resetTimeoutOnProgress = true;
    opts.onprogress = (p) => {
      out({ event: 'progress', call: op.id, progress: p });
      if (op.cancelOnProgress) ac.abort('the person stopped waiting');
    };
  }
  state.calls.set(op.id, ac);
  try {
    return { result: await state.client.callTool({ name: op.name, arguments: op.arguments }, CallToolResultSchema, opts) };
  } finally {
    state.calls.delete(op.id);
  }
}

const ops = {
  connect,
  list,
  schemas: async () => ({ problems: state.tools.map((t) => ({ tool: t.name, problems: checkSchema(t) })).filter((p) => p.problems.length) }),
  call,
  ping: async () => ({ result: await state.client.ping() }),
  request: async (op) => ({ result: await state.client.request({ method: op.method, params: op.params }, z.object({}).passthrough()) }),
  terminate: async () => { await state.transport.inner.terminateSession(); return { sessionId: state.transport.sessionId ?? null }; },
  close: async () => { await state.client.close(); return {}; },
  log: async () => ({ errors: state.errors, notifications: state.notifications, http: state.http, stderr: state.stderr }),
};

const rl = readline.createInterface({ input: process.stdin });
rl.on('line', async (line) => {
  let op;
  try { op = JSON.parse(line); } catch { return; }
  try {
    const fn = ops[op.op];
    if (!fn) throw new Error('unknown op ' + op.op);
    out({ id: op.id, result: await fn(op) });
  } catch (e) {
    out({ id: op.id, error: { code: e?.code ?? null, message: String(e?.message ?? e), name: e?.name } });
  }
});
rl.on('close', async () => { try { await state.client?.close(); } catch { /* gone already */ } process.exit(0); });
