// sdkclient bridges stdio to an ACP server through the ACP SDK's own
// experimental transport clients (@agentclientprotocol/sdk 2.4.0's
// createHttpStream and createWebSocketStream), so that the tests' Go ACP
// client talks to `acp-sidecar serve` over the very wire the SDK speaks.
// It adds nothing of its own: each stdin line is one message written to
// the SDK stream, each message the stream yields is one stdout line.
//
// usage: node sdkclient.mjs http|ws URL
// env: ACP_SDK_DIR (scripts/e2e-setup.sh sdk), ACP_TOKEN (the bearer token)
import path from "node:path";
import readline from "node:readline";
import { pathToFileURL } from "node:url";

const [transport, url] = process.argv.slice(2);
const dir = process.env.ACP_SDK_DIR;
if (!dir || !url || (transport !== "http" && transport !== "ws")) {
  console.error("usage: ACP_SDK_DIR=DIR ACP_TOKEN=T node sdkclient.mjs http|ws URL");
  process.exit(2);
}
const mod = (p) => import(pathToFileURL(path.join(dir, "node_modules", p)).href);
const headers = process.env.ACP_TOKEN ? { Authorization: `Bearer ${process.env.ACP_TOKEN}` } : {};

let stream;
if (transport === "ws") {
  const { createWebSocketStream } = await mod("@agentclientprotocol/sdk/dist/transports/ws-stream.js");
  const { default: WebSocket } = await mod("ws/wrapper.mjs");
  stream = createWebSocketStream(url, { WebSocket, headers });
} else {
  const { createHttpStream } = await mod("@agentclientprotocol/sdk/dist/transports/http-stream.js");
  stream = createHttpStream(url, { headers });
}

const writer = stream.writable.getWriter();
let writes = Promise.resolve();
const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
  if (!line.trim()) return;
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    console.error(`sdkclient: stdin line is not JSON: ${line.slice(0, 200)}`);
    return;
  }
  writes = writes.then(() => writer.write(msg)).catch((err) => {
    console.error(`sdkclient: write failed: ${err?.message ?? err}`);
  });
});
lines.on("close", () => {
  writes.then(() => writer.close()).catch((err) => {
    console.error(`sdkclient: close failed: ${err?.message ?? err}`);
  });
});

const reader = stream.readable.getReader();
for (;;) {
  let result;
  try {
    result = await reader.read();
  } catch (err) {
    console.error(`sdkclient: the stream failed: ${err?.message ?? err}`);
    process.exit(1);
  }
  if (result.done) break;
  process.stdout.write(JSON.stringify(result.value) + "\n");
}
process.exit(0);
