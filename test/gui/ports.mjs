// freePort picks loopback ports for the servers the GUI tests start, as
// internal/porttest does for the Go tests: a port drawn below Linux's
// ephemeral range (32768-60999), free a moment ago for both TCP and UDP
// (a DNS listener takes both), and never returned twice in this process.
// Port 0 let the kernel hand the same port out twice in a row (a global's
// sync address became its DNS address and the global could not start),
// and the kernel also hands ephemeral ports to the tests' own outgoing
// connections.
import dgram from 'node:dgram';
import net from 'node:net';

export const RANGE_LOW = 20000;
export const RANGE_HIGH = 32000;

const given = new Set();

function freeTCP(port) {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

function freeUDP(port) {
  return new Promise((resolve) => {
    const s = dgram.createSocket('udp4');
    s.once('error', () => { try { s.close(); } catch { /* never bound */ } resolve(false); });
    s.bind(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

export async function freePort() {
  for (let i = 0; i < 1000; i++) {
    const port = RANGE_LOW + Math.floor(Math.random() * (RANGE_HIGH - RANGE_LOW));
    if (given.has(port)) { continue; }
    if (await freeTCP(port) && await freeUDP(port)) {
      given.add(port);
      return port;
    }
  }
  throw new Error(`no loopback port in ${RANGE_LOW}-${RANGE_HIGH} was free for TCP and UDP in 1,000 draws`);
}
