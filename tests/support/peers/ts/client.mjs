// A client session on the official TypeScript SDK (v2): a peer mcpbench did not write.
//
//   node client.mjs ERA URL                 (Streamable HTTP)
//   node client.mjs ERA stdio COMMAND ARG…  (a server it starts)
//
// ERA: `auto` (2026-07-28 where the server speaks it) or `legacy` (the 2025 handshake). The session:
// the tool list, `echo`, `ask` (its question answered "yes", by elicitation), and with a server that
// has `toggle` (server.mjs) or `toggle_tool` (mcpbench's reference server), the tool list's change
// heard (on a `subscriptions/listen` stream in 2026-07-28).
// Prints what it got as one JSON object; exits 1 when a step fails, every step bounded in time.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const STEP_MS = 20000;

const bounded = (promise, what) =>
    Promise.race([promise, new Promise((_, reject) => setTimeout(() => reject(new Error(`${what}: no answer in ${STEP_MS} ms`)), STEP_MS).unref())]);

const [era, where, ...command] = process.argv.slice(2);
const client = new Client(
    { name: 'ts-peer-client', version: '1.0.0' },
    { versionNegotiation: { mode: era === 'legacy' ? 'legacy' : 'auto' }, capabilities: { elicitation: { form: {} } } }
);
client.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { answer: 'yes' } }));
let heard;
const changed = new Promise(resolve => (heard = resolve));
client.setNotificationHandler('notifications/tools/list_changed', () => heard());

const transport = where === 'stdio'
    ? new StdioClientTransport({ command: command[0], args: command.slice(1), stderr: 'inherit' })
    : new StreamableHTTPClientTransport(new URL(where));
const got = {};
try {
    await bounded(client.connect(transport), 'connect');
    got.version = client.getNegotiatedProtocolVersion?.() ?? null;
    const tools = (await bounded(client.listTools(), 'tools/list')).tools.map(tool => tool.name).sort();
    got.tools = tools;
    got.echo = (await bounded(client.callTool({ name: 'echo', arguments: { text: 'hi' } }), 'echo')).content[0].text;
    got.ask = (await bounded(client.callTool({ name: 'ask', arguments: { question: 'ready?' } }), 'ask')).content[0].text;
    const toggle = tools.find(name => name === 'toggle' || name === 'toggle_tool');
    if (toggle) {
        const subscription = got.version === '2026-07-28'
            ? await bounded(client.listen({ toolsListChanged: true }), 'subscriptions/listen') : null;
        got.toggle = (await bounded(client.callTool({ name: toggle }), toggle)).content[0].text;
        await bounded(changed, 'notifications/tools/list_changed');
        got.heard = true;
        await subscription?.close();
    }
    await client.close();
} catch (error) {
    console.log(JSON.stringify({ ...got, error: error instanceof Error ? error.message : String(error) }));
    await client.close().catch(() => {});
    process.exit(1);
}
console.log(JSON.stringify(got));
