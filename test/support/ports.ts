/**
 * `quietPort()`: a free loopback port for a server the tests start by port number (redis-server,
 * wrangler dev), taken below the kernel's ephemeral range. A port from `listen(0)` comes from
 * that range, and so does the local port of every connection the tests open: in the seconds
 * before such a server binds it (or while it is down for a restart), a clone's connection could
 * take it. Below the range only a server asked for that very number can.
 */
const EPHEMERAL_FROM = (() => {
  try {
    const range = Deno.readTextFileSync("/proc/sys/net/ipv4/ip_local_port_range");
    const low = Number(range.trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 2048 ? low : 32768;
  } catch {
    return 32768;
  }
})();

/** A loopback port that is free now, from [1024 + (EPHEMERAL_FROM - 1024) / 2, EPHEMERAL_FROM). */
export function quietPort(): number {
  const low = 1024 + Math.floor((EPHEMERAL_FROM - 1024) / 2);
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = low + Math.floor(Math.random() * (EPHEMERAL_FROM - low));
    try {
      Deno.listen({ hostname: "127.0.0.1", port }).close();
      return port;
    } catch {
      // Taken: another.
    }
  }
  throw new Error("no free loopback port below the ephemeral range");
}
