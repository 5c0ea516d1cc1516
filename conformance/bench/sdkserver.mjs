// sdkserver serves an ACP agent on stdio over Streamable HTTP and
// WebSocket with the ACP SDK's own server (@agentclientprotocol/sdk 2.4.0's
// AcpServer and its Node adapter), one agent process per connection: the
// baseline `acp-sidecar bench -only remote` measures serve against.
//
// usage: node sdkserver.mjs AGENT [ARGS...]   (env ACP_SDK_DIR)
// It prints "listening PORT" once it serves on 127.0.0.1.
import { spawn } from "node:child_process";
import http from "node:http";
import path from "node:path";
import readline from "node:readline";
import { pathToFileURL } from "node:url";

const dir = process.env.ACP_SDK_DIR;
const argv = process.argv.slice(2);
if (!dir || argv.length === 0) {
  console.error("usage: ACP_SDK_DIR=DIR node sdkserver.mjs AGENT [ARGS...]");
  process.exit(2);
}
const mod = (p) => import(pathToFileURL(path.join(dir, "node_modules", p)).href);
const { AcpServer } = await mod("@agentclientprotocol/sdk/dist/transports/server.js");
const { createNodeHttpHandler, createNodeWebSocketUpgradeHandler } = await mod("@agentclientprotocol/sdk/dist/transports/node-adapter.js");
const { WebSocketServer } = await mod("ws/wrapper.mjs");

// An agent on stdio as the SDK server's AgentConnector: messages in are
// written to its stdin as lines, its stdout lines are messages out.
const stdioAgent = () => ({
  connect(stream) {
    const child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
    const writer = stream.writable.getWriter();
    const lines = readline.createInterface({ input: child.stdout, crlfDelay: Infinity });
    lines.on("line", (line) => {
      if (line.trim()) writer.write(JSON.parse(line)).catch(() => {});
    });
    (async () => {
      const reader = stream.readable.getReader();
      for (;;) {
        const { value, done } = await reader.read().catch(() => ({ done: true }));
        if (done) break;
        child.stdin.write(JSON.stringify(value) + "\n");
      }
      child.stdin.end();
    })();
    const closed = new Promise((resolve) => child.on("exit", () => { writer.close().catch(() => {}); resolve(); }));
    return { closed };
  },
});

const server = new AcpServer({ createAgent: stdioAgent });
const httpServer = http.createServer(createNodeHttpHandler(server));
const wss = new WebSocketServer({ noServer: true });
httpServer.on("upgrade", createNodeWebSocketUpgradeHandler(server, wss));
httpServer.listen(0, "127.0.0.1", () => {
  console.log(`listening ${httpServer.address().port}`);
});
const stop = async () => {
  await server.close().catch(() => {});
  httpServer.close();
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
