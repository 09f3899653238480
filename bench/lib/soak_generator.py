"""The soak's load generator: asyncio streams over persistent HTTP/1.1 connections (a FIFO pool,
more opened on demand up to a cap), a closed loop for the capacity and open-loop Poisson arrivals
for the overload; every answer checked and recorded from its scheduled arrival."""
import asyncio
import collections
import json
import time

import numpy as np

from soak_model import HIGH, LIMIT_RE, LOW, N_INPUTS, OUTPUT


class Rec:
    """Per-request outcomes. code: HTTP status, or -1 connection error,
    -2 client timeout, -3 wrong output, -4 503 without the limit named.
    Times in seconds from the scheduled arrival: lag (the generator started
    it), wlag (its last byte was written: includes waiting for a connection
    and for the server to read), lat (the answer's last byte was read)."""
    __slots__ = ("t_sched", "prio", "code", "lat", "lag", "wlag")

    def __init__(self, t_sched, prio, code, lat, lag, wlag):
        self.t_sched, self.prio, self.code, self.lat, self.lag, self.wlag = t_sched, prio, code, lat, lag, wlag


class Generator:
    def __init__(self, port, requests, refs, timeout_s, max_connections):
        self.port, self.requests, self.refs, self.timeout_s = port, requests, refs, timeout_s
        self.max_connections = max_connections
        self.idle = collections.deque()
        self.waiters = collections.deque()  # futures of arrivals waiting for a connection (at the cap)
        self.open_now = 0        # connections open (idle and busy)
        self.max_open = 0
        self.opened = 0          # connections opened (pool and on demand)
        self.opened_on_demand = 0
        self.conn_waits = 0      # arrivals that found max_connections busy and waited
        self.stale_dropped = 0   # idle connections the server had closed
        self.recs = []
        self.messages = collections.Counter()   # 503 and error messages
        self.in_flight = 0
        self.max_in_flight = 0

    async def _open(self):
        self.open_now += 1
        self.max_open = max(self.max_open, self.open_now)
        try:
            r, w = await asyncio.open_connection("127.0.0.1", self.port)
        except BaseException:
            self._closed()
            raise
        self.opened += 1
        return r, w

    def _release(self, conn):
        """A connection whose exchange is over and that stays open."""
        while self.waiters:
            fut = self.waiters.popleft()
            if not fut.done():
                fut.set_result(conn)
                return
        self.idle.append(conn)

    def _closed(self):
        self.open_now -= 1
        while self.waiters:
            fut = self.waiters.popleft()
            if not fut.done():
                fut.set_result(None)  # room for one more: the waiter opens it
                return

    async def fill_pool(self, n):
        for _ in range(n):
            self.idle.append(await self._open())

    async def _conn(self):
        while self.idle:
            r, w = self.idle.popleft()   # FIFO: every pooled connection stays in use
            if r.at_eof() or w.is_closing():
                self.stale_dropped += 1
                w.close()
                self._closed()
                continue
            return r, w
        if self.open_now >= self.max_connections:
            self.conn_waits += 1
            fut = asyncio.get_running_loop().create_future()
            self.waiters.append(fut)
            try:
                conn = await fut
            except asyncio.CancelledError:
                # Timed out while waiting; a connection handed over meanwhile goes to the next one.
                if fut.done() and not fut.cancelled():
                    if fut.result() is not None:
                        self._release(fut.result())
                    else:
                        self.open_now += 1  # the room it was given
                        self._closed()
                raise
            if conn is not None:
                return conn
        self.opened_on_demand += 1
        return await self._open()

    async def close_pool(self):
        while self.idle:
            _r, w = self.idle.popleft()
            w.close()
            self._closed()

    async def _exchange(self, msg, times):
        r, w = await self._conn()
        try:
            w.write(msg)
            await w.drain()
            times.append(time.monotonic())
            head = await r.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            low = head.lower()
            i = low.find(b"content-length:")
            if i < 0:
                raise ConnectionError("response without Content-Length")
            n = int(low[i + 15:low.index(b"\r\n", i)])
            body = await r.readexactly(n)
        except BaseException:
            w.close()
            self._closed()
            raise
        if b"connection: close" in low:
            w.close()
            self._closed()
        else:
            self._release((r, w))
        return status, body

    async def one(self, t_sched, prio, idx, t_base):
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        t_send = time.monotonic()
        times = []
        try:
            status, body = await asyncio.wait_for(self._exchange(self.requests[prio][idx], times), self.timeout_s)
            code = status
            if status == 200:
                try:
                    out = json.loads(body)["outputs"][0]
                    got = np.asarray(out["data"], np.float32)
                    if out["name"] != OUTPUT or not np.allclose(got, self.refs[idx], rtol=1e-3, atol=1e-4):
                        code = -3
                        self.messages[f"wrong output for input {idx}"] += 1
                except (ValueError, KeyError, IndexError, TypeError) as e:
                    code = -3
                    self.messages[f"unparsable 200 body: {e}"] += 1
            else:
                try:
                    msg = json.loads(body).get("error", "")
                except ValueError:
                    msg = body[:200].decode(errors="replace")
                self.messages[f"{status}: {msg}"] += 1
                if status == 503 and not LIMIT_RE.search(msg):
                    code = -4
        except asyncio.TimeoutError:
            code = -2
            self.messages[f"client timeout after {self.timeout_s} s"] += 1
        except (OSError, ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as e:
            code = -1
            self.messages[f"connection error: {type(e).__name__}: {e}"] += 1
        except Exception as e:  # anything else is an error too, never a lost record
            code = -1
            self.messages[f"client error: {type(e).__name__}: {e}"] += 1
        t_done = time.monotonic()
        self.in_flight -= 1
        self.recs.append(Rec(t_sched - t_base, prio, code, t_done - t_sched, t_send - t_sched,
                             (times[0] if times else t_done) - t_sched))

    async def closed_loop(self, concurrency, seconds, high_share, rng):
        """`concurrency` clients, each sending its next request when the last is answered."""
        t_base = time.monotonic()
        end = t_base + seconds

        async def client(k):
            i = k
            while time.monotonic() < end:
                prio = HIGH if rng.random() < high_share else LOW
                await self.one(time.monotonic(), prio, i % N_INPUTS, t_base)
                i += 1
        await asyncio.gather(*(client(k) for k in range(concurrency)))
        return t_base

    async def open_loop(self, rate, seconds, high_share, rng):
        """Poisson arrivals at `rate` per second for `seconds`; never waits for answers."""
        tasks = set()
        t_base = time.monotonic() + 0.2
        t_next = t_base + rng.exponential(1.0 / rate)
        end = t_base + seconds
        k = 0
        while t_next < end:
            now = time.monotonic()
            while t_next <= now and t_next < end:
                prio = HIGH if rng.random() < high_share else LOW
                task = asyncio.create_task(self.one(t_next, prio, k % N_INPUTS, t_base))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                k += 1
                t_next += rng.exponential(1.0 / rate)
            await asyncio.sleep(max(0.0, min(t_next, end) - time.monotonic()))
        t_last_arrival = time.monotonic()
        if tasks:
            await asyncio.wait(tasks, timeout=self.timeout_s + 10)
        return t_base, k, t_last_arrival
