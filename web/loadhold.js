// Holds a headless browser's virtual time while the page loads its first picture.
// `chromium --headless --screenshot --virtual-time-budget=MS URL`, how tools and CI take
// pictures of pages, lets virtual time run on whenever no network fetch is pending and takes
// the picture once the budget is spent. A WebSocket's messages are not fetches: a page that
// waits only on its WebSocket is pictured before the daemon has answered (no worlds, an empty
// view). So until the page has drawn (release), one small request after another (GET
// /healthz) stays in flight, which holds virtual time (each request costs it about 10 ms). In a
// browser in real time they are a few requests while the page loads, and never more than
// MAX_REQUESTS.
const MAX_REQUESTS = 1000;

export class LoadHold {
  constructor(url = '/healthz') {
    this.url = url;
    this.requests = 0;   // sent so far
    this.limit = MAX_REQUESTS;
    this.done = false;   // released, or given up
  }

  // Holds from now until release(), the limit, or a request that fails (the daemon went away:
  // then what the page waits for is a timer, which must be let run).
  start() {
    if (this.running || this.done) return;
    this.running = true;
    (async () => {
      try {
        while (!this.done && this.requests < this.limit) {
          this.requests++;
          await (await fetch(this.url, { cache: 'no-store' })).arrayBuffer();
        }
      } catch {
        // nothing more to hold for
      }
      this.running = false;
      this.done = true;
    })();
  }

  // Holds for at most n more requests (what is left to load is welcome, not needed).
  soon(n) {
    this.limit = Math.min(this.limit, this.requests + n);
  }

  release() {
    this.done = true;
  }
}
