// Probot 14 receiving webhooks the way `probot run` does: one Node process, the webhook
// middleware verifying the signature and dispatching to an app with one handler that does
// nothing, answering once the handlers are done. bench/scale.py starts it for comparison.
//
//     node probot_server.mjs PORT SECRET PRIVATE_KEY_PATH
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { createNodeMiddleware, createProbot } from "probot";

const [port, secret, keyPath] = process.argv.slice(2);
const probot = createProbot({
  overrides: {
    appId: 1,
    privateKey: readFileSync(keyPath, "utf8"),
    secret,
    logLevel: "warn",
  },
});
const app = (app) => {
  app.on("issues", async () => {});
};
const middleware = await createNodeMiddleware(app, { probot, webhooksPath: "/webhooks/github" });
createServer((req, res) => {
  middleware(req, res, () => {
    res.writeHead(404).end();
  });
}).listen(Number(port), "127.0.0.1", () => console.log("listening"));
