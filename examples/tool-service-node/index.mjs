// A lovia tool service in Node.js: a NATS micro service whose endpoints
// are tools. Each endpoint listens on <prefix>.tools.<service>.<tool> and
// carries the tool's description and JSON Schema in its metadata; lovia
// workers discover it and agents call its tools as <service>__<tool>.
//
//   NATS_URL=nats://127.0.0.1:4222 node index.mjs
//
// Run several instances: NATS balances the calls over the service's queue
// group. The Lovia-Run-Id, Lovia-Call-Id and Lovia-Agent headers say which
// run and call a request is for. This service does not deduplicate: its
// tools have no side effects, so a call made again (by a run's new owner
// after a worker died) may simply run again. A service whose tools have
// effects keeps each reply by run id AND call id (a call id is unique only
// within its run: never key by it alone), as pkg/toolsvc's Dedupe does.
import { connect } from "@nats-io/transport-node";
import { Svcm } from "@nats-io/services";

const prefix = process.env.LOVIA_PREFIX || "lovia";
const service = "texttools";

const tools = {
  word_count: {
    description: "Count the words of a text.",
    schema: {
      type: "object",
      properties: { text: { type: "string", description: "The text to count." } },
      required: ["text"],
    },
    run: ({ text }) => {
      const words = text.trim().split(/\s+/).filter(Boolean);
      return `${words.length} words`;
    },
  },
  shout: {
    description: "Upper-case a text.",
    schema: {
      type: "object",
      properties: { text: { type: "string" } },
      required: ["text"],
    },
    run: ({ text }) => {
      if (text.trim() === "") {
        throw new Error("nothing to shout: give some text");
      }
      return text.toUpperCase() + "!";
    },
  },
};

// argsProblem checks what the tools rely on before they run: an object,
// with each required property, of its declared type. Workers validate
// against the full schema before they call; a raw caller (nats req) may
// send anything.
function argsProblem(schema, args) {
  if (args === null || typeof args !== "object" || Array.isArray(args)) {
    return "the arguments must be a JSON object";
  }
  for (const key of schema.required ?? []) {
    if (!(key in args)) {
      return `"${key}" is required`;
    }
  }
  for (const [key, prop] of Object.entries(schema.properties ?? {})) {
    if (key in args && prop.type === "string" && typeof args[key] !== "string") {
      return `"${key}" must be a string`;
    }
  }
  return "";
}

const nc = await connect({ servers: process.env.NATS_URL || "nats://127.0.0.1:4222" });
const svc = await new Svcm(nc).add({
  name: service,
  version: "1.0.0",
  description: "text tools for lovia agents, in Node.js",
});

for (const [name, tool] of Object.entries(tools)) {
  svc.addEndpoint(name, {
    subject: `${prefix}.tools.${service}.${name}`,
    metadata: { description: tool.description, schema: JSON.stringify(tool.schema) },
    handler: (err, msg) => {
      if (err) {
        console.error(`${name}: ${err.message}`);
        return;
      }
      const call = msg.headers?.get("Lovia-Call-Id") ?? "";
      let args;
      try {
        args = msg.json();
      } catch {
        args = undefined;
      }
      const bad = argsProblem(tool.schema, args);
      if (bad) {
        msg.respondError(400, `invalid arguments for ${service}__${name}: ${bad}`);
        return;
      }
      try {
        const out = tool.run(args);
        console.error(`${name} call ${call}: ok`);
        msg.respond(typeof out === "string" ? out : JSON.stringify(out));
      } catch (e) {
        console.error(`${name} call ${call}: ${e.message}`);
        msg.respondError(500, e.message);
      }
    },
  });
}

console.error(`tool service ${service} serving ${Object.keys(tools).join(", ")} under ${prefix}.tools.${service}`);

const stop = async () => {
  await svc.stop();
  await nc.drain();
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
