// RunStream reads a run's events as Server-Sent Events with fetch, so the
// bearer token can go in a header (an EventSource cannot send one). When
// the stream drops before the terminal event it reconnects with
// Last-Event-ID set to the last event delivered: the gateway resumes after
// it, and no event is lost or delivered twice.

import {authHeaders, base, enc, errorOf, unreachable} from './api.js';
import {sleep} from './dom.js';

const TERMINAL = new Set(['run_completed', 'run_failed']);

// SILENCE_MS is how long a stream may stay silent before it is taken for
// dead and reopened: the gateway writes a keep-alive comment after each
// heartbeat (15 s by default) without events.
const SILENCE_MS = 45000;

export class RunStream {
  // onEvent(envelope) gets each event once, in seq order; onState(state,
  // detail) gets 'connecting', 'live', 'reconnecting' (detail: the error),
  // 'ended' or 'failed' (detail: the error).
  constructor(runID, {onEvent, onState}) {
    this.runID = runID;
    this.onEvent = onEvent;
    this.onState = onState || (() => {});
    this.lastID = 0; // the seq of the last event delivered
    this.connects = 0;
    this.ctl = new AbortController();
  }

  // start reads until the terminal event, a refusal, or stop.
  async start() {
    let delay = 500;
    while (!this.ctl.signal.aborted) {
      this.live = false;
      try {
        if (await this.connect()) {
          this.onState('ended');
          return;
        }
      } catch (e) {
        if (this.ctl.signal.aborted) return;
        if (e.fatal) {
          this.onState('failed', e);
          return;
        }
        if (this.live) delay = 500; // it was streaming: try again soon
        this.onState('reconnecting', e);
        await sleep(delay, this.ctl.signal);
        delay = Math.min(delay * 2, 10000);
      }
    }
  }

  stop() { this.ctl.abort(); }

  // connect reads one HTTP stream until the terminal event (true), or
  // throws why it stopped.
  async connect() {
    this.onState('connecting');
    this.connects++;
    const headers = authHeaders({Accept: 'text/event-stream'});
    if (this.lastID > 0) headers['Last-Event-ID'] = String(this.lastID);
    // This connection ends with stop, or when it stays silent too long (a
    // connection that died without a reset never ends on its own).
    const conn = new AbortController();
    const onStop = () => conn.abort();
    this.ctl.signal.addEventListener('abort', onStop, {once: true});
    let silent = false;
    let timer = null;
    const alive = () => {
      clearTimeout(timer);
      timer = setTimeout(() => { silent = true; conn.abort(); }, SILENCE_MS);
    };
    try {
      alive();
      return await this.read(headers, conn.signal, alive);
    } catch (e) {
      if (silent) throw Object.assign(new Error(`the event stream was silent for ${SILENCE_MS / 1000}s`), {type: 'StreamSilent'});
      throw e;
    } finally {
      clearTimeout(timer);
      this.ctl.signal.removeEventListener('abort', onStop);
    }
  }

  // read opens the stream and reads it; alive() is called on every chunk.
  async read(headers, signal, alive) {
    let res;
    try {
      res = await fetch(base() + '/v1/runs/' + enc(this.runID) + '/events', {headers, signal, cache: 'no-store'});
    } catch (e) {
      throw e.name === 'AbortError' ? e : unreachable(e);
    }
    if (res.status === 204) return true; // resumed after the last event of a finished run
    if (!res.ok) {
      const err = await errorOf(res);
      // Retry what may pass (unavailable, timeouts, overload); a refusal is final.
      err.fatal = res.status >= 400 && res.status < 500 && res.status !== 408 && res.status !== 429;
      throw err;
    }
    this.live = true;
    this.onState('live');
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    let ev = {id: '', event: '', data: []};
    let ended = false;
    try {
      for (;;) {
        const {value, done} = await reader.read();
        if (done) break;
        alive();
        buf += value;
        let nl;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl).replace(/\r$/, '');
          buf = buf.slice(nl + 1);
          if (line === '') {
            if (this.dispatch(ev)) ended = true;
            ev = {id: '', event: '', data: []};
            continue;
          }
          if (line.startsWith(':')) continue; // a keep-alive comment
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          let val = colon < 0 ? '' : line.slice(colon + 1);
          if (val.startsWith(' ')) val = val.slice(1);
          if (field === 'id') ev.id = val;
          else if (field === 'event') ev.event = val;
          else if (field === 'data') ev.data.push(val);
        }
      }
    } catch (e) {
      if (e.name === 'AbortError' || e.fatal !== undefined || e.type) throw e;
      throw Object.assign(new Error('the event stream broke: ' + e.message), {type: 'StreamBroken'});
    }
    if (ended) return true;
    throw Object.assign(new Error('the event stream ended before the run did'), {type: 'StreamEnded'});
  }

  // dispatch delivers one SSE event; it reports a terminal event.
  dispatch(ev) {
    if (ev.data.length === 0) return false;
    const data = ev.data.join('\n');
    if (ev.event === 'stream_error') {
      let body = {};
      try { body = JSON.parse(data).error || {}; } catch { /* keep it empty */ }
      throw Object.assign(new Error(body.message || 'the event stream failed'), {type: body.type, hint: body.hint});
    }
    let env;
    try {
      env = JSON.parse(data);
    } catch (e) {
      console.warn('lovia console: skipping an event that is not JSON', ev.id, e);
      if (Number(ev.id) > this.lastID) this.lastID = Number(ev.id);
      return false;
    }
    const seq = Number(ev.id || env.seq);
    if (seq && seq <= this.lastID) return false; // already shown
    if (seq) this.lastID = seq;
    try {
      this.onEvent(env);
    } catch (e) {
      // A drawing bug must not stop the stream: the next events still show.
      console.error('lovia console: drawing event', seq, env.type, e);
    }
    return TERMINAL.has(env.type);
  }
}
