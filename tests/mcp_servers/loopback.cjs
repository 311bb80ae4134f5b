// Preloaded with `node --require` by tests/mcp_servers/everything.py:
// - a server that listens on a bare port (server-everything calls `app.listen(PORT)`) listens on
//   127.0.0.1 only, not on every interface, so a test server is never reachable from elsewhere;
// - once a server really listens it prints `loopback.cjs: listening on 127.0.0.1:<port>` to stderr.
//   server-everything's own "listening on port" line is no proof: Express 5 calls the listen
//   callback on failure too, so it is printed even when the port is taken (then the process exits 1).
"use strict";
const net = require("node:net");

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function listenOnLoopback(...args) {
  const port = args[0];
  const isBarePort = typeof port === "number" || (typeof port === "string" && /^\d+$/.test(port));
  if (isBarePort && typeof args[1] !== "string") {
    args.splice(1, 0, "127.0.0.1");
  }
  this.once("listening", () => {
    const address = this.address();
    if (address !== null && typeof address === "object") {
      process.stderr.write(`loopback.cjs: listening on ${address.address}:${address.port}\n`);
    }
  });
  return listen.apply(this, args);
};
