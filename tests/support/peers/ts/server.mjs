// A server on the official TypeScript SDK (v2), in both eras: a peer mcpbench did not write.
//
//   node server.mjs stdio
//   node server.mjs http PORT      (Streamable HTTP at /mcp on 127.0.0.1)
//
// Tools: `echo`; `ask`, which asks the client a question (an `inputRequired` round toward a
// 2026-07-28 request, an `elicitation/create` request inside a 2025-era call); `toggle`, which turns
// the tool `extra` on or off and says the tool list changed (on `subscriptions/listen` streams in
// 2026-07-28, as `notifications/tools/list_changed` on the session before).
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';

import { NodeStreamableHTTPServerTransport, toNodeHandler, toWebRequest } from '@modelcontextprotocol/node';
import { createMcpHandler, inputRequired, isInitializeRequest, isLegacyRequest, McpServer } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import * as z from 'zod/v4';

const ANSWER_SCHEMA = { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'] };

let extraEnabled = false;
let publish = () => {};

const text = value => ({ content: [{ type: 'text', text: value }] });

function buildServer(requestContext) {
    const server = new McpServer(
        { name: 'ts-peer', version: '1.0.0' },
        { capabilities: { tools: { listChanged: true } } }
    );
    server.registerTool('echo', { description: 'Echo the text', inputSchema: z.object({ text: z.string() }) }, async ({ text: value }) =>
        text(value)
    );
    server.registerTool('ask', { description: 'Ask the client a question', inputSchema: z.object({ question: z.string() }) },
        async ({ question }, ctx) => {
            if (requestContext?.era === 'legacy') {
                const answer = await ctx.mcpReq.elicitInput({ mode: 'form', message: question, requestedSchema: ANSWER_SCHEMA });
                return text(`answered: ${answer.content?.answer ?? answer.action}`);
            }
            const response = ctx.mcpReq.inputResponses?.['answer'];
            if (!response) {
                return inputRequired({
                    inputRequests: { answer: inputRequired.elicit({ message: question, requestedSchema: ANSWER_SCHEMA }) },
                    requestState: 'asked'
                });
            }
            return text(`answered: ${response.content?.answer ?? response.action}`);
        });
    const extra = server.registerTool('extra', { description: 'There when toggled on' }, async () => text('extra'));
    if (!extraEnabled) extra.disable();
    server.registerTool('toggle', { description: 'Turn the tool extra on or off; the tool list changes' }, async () => {
        extraEnabled = !extraEnabled;
        extra.update({ enabled: extraEnabled });
        publish();
        return text(`extra ${extraEnabled ? 'on' : 'off'}`);
    });
    return server;
}

const [transport, port] = process.argv.slice(2);
if (transport === 'stdio') {
    void serveStdio(buildServer);
} else if (transport === 'http') {
    // 2026-07-28 served per request; the 2025 era on sessions of its own, which a server request
    // (ask's elicitation) and the standalone GET stream need.
    const handler = createMcpHandler(buildServer, { legacy: 'reject' });
    publish = () => handler.notify.toolsChanged();
    const modern = toNodeHandler(handler);
    const sessions = new Map();
    const legacy = async (req, res, body) => {
        const id = req.headers['mcp-session-id'];
        if (id && sessions.has(id)) {
            await sessions.get(id).handleRequest(req, res, body);
        } else if (!id && isInitializeRequest(body)) {
            const session = new NodeStreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), onsessioninitialized: sid => sessions.set(sid, session) });
            session.onclose = () => session.sessionId && sessions.delete(session.sessionId);
            await buildServer({ era: 'legacy' }).connect(session);  // (its own `extra` says its changes on its session)
            await session.handleRequest(req, res, body);
        } else {
            res.writeHead(id ? 404 : 400, { 'content-type': 'application/json' })
                .end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: id ? 'Session not found' : 'Session ID required' }, id: null }));
        }
    };
    createServer((req, res) => {
        void (async () => {
            const request = await toWebRequest(req);
            const old = await isLegacyRequest(request);
            const body = req.method === 'POST' ? await request.json().catch(() => undefined) : undefined;
            await (old ? legacy(req, res, body) : modern(req, res, body));
        })().catch(error => {
            console.error('ts-peer:', error instanceof Error ? error.message : error);
            if (!res.headersSent) res.writeHead(500).end();
        });
    }).listen(Number(port), '127.0.0.1');
} else {
    console.error('usage: server.mjs stdio | http PORT');
    process.exit(2);
}
