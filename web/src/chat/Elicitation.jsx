// MCP elicitation: a server asks the user for input mid-tool-call (`cf_agent_mcp_elicitation`,
// pushed to every tab and re-sent on connect). Each pending question renders as a form shaped
// like an approval card, built from its flat requested schema; the answer is checked here
// before it is sent (`cf_agent_mcp_elicitation_response`), the agent's refusal is shown next
// to the form, and the card goes away when any tab answers (`..._resolved`).
import { useEffect, useState } from "react";

const PREFIX = "cf_agent_mcp_elicitation";

/** The form's fields, in schema order: `[name, property, required]`. */
function fields(schema) {
  const required = new Set(schema?.required ?? []);
  return Object.entries(schema?.properties ?? {}).map(([name, prop]) => [name, prop ?? {}, required.has(name)]);
}

/** Turns the form's raw values into the answer's content, or returns per-field errors; the
 * same checks as the agent makes (required, type, enum, bounds), so a bad answer is caught
 * before it is sent. */
export function checkAnswer(schema, raw) {
  const content = {};
  const errors = {};
  for (const [name, prop, required] of fields(schema)) {
    const value = raw[name];
    if (prop.type === "boolean") {
      if (value !== undefined) content[name] = Boolean(value);
      else if (required) content[name] = false;
      continue;
    }
    const text = value === undefined ? "" : String(value).trim();
    if (text === "") {
      if (required) errors[name] = "Required.";
      continue;
    }
    if (prop.type === "number" || prop.type === "integer") {
      const n = Number(text);
      if (!Number.isFinite(n)) errors[name] = "Not a number.";
      else if (prop.type === "integer" && !Number.isInteger(n)) errors[name] = "Must be a whole number.";
      else if (prop.minimum !== undefined && n < prop.minimum) errors[name] = `At least ${prop.minimum}.`;
      else if (prop.maximum !== undefined && n > prop.maximum) errors[name] = `At most ${prop.maximum}.`;
      else content[name] = n;
      continue;
    }
    if (prop.enum && !prop.enum.includes(text)) errors[name] = `One of ${prop.enum.join(", ")}.`;
    else if (prop.minLength !== undefined && text.length < prop.minLength) errors[name] = `At least ${prop.minLength} characters.`;
    else if (prop.maxLength !== undefined && text.length > prop.maxLength) errors[name] = `At most ${prop.maxLength} characters.`;
    else content[name] = text;
  }
  return Object.keys(errors).length ? { errors } : { content };
}

const INPUT_TYPES = { email: "email", uri: "url", date: "date", "date-time": "datetime-local" };

function Field({ name, prop, required, value, error, onChange }) {
  const label = prop.title ?? name;
  let input;
  if (prop.type === "boolean") {
    input = <input type="checkbox" name={name} checked={Boolean(value)} onChange={(e) => onChange(e.target.checked)} />;
  } else if (prop.enum) {
    input = (
      <select name={name} value={value ?? ""} onChange={(e) => onChange(e.target.value)}>
        <option value="">—</option>
        {prop.enum.map((option, i) => (
          <option key={option} value={option}>{prop.enumNames?.[i] ?? option}</option>
        ))}
      </select>
    );
  } else {
    const numeric = prop.type === "number" || prop.type === "integer";
    const type = numeric ? "number" : (INPUT_TYPES[prop.format] ?? "text");
    input = <input type={type} name={name} step={prop.type === "number" ? "any" : undefined} value={value ?? ""} onChange={(e) => onChange(e.target.value)} />;
  }
  return (
    <label className={`elicit-field${error ? " invalid" : ""}`} data-field={name}>
      <span className="elicit-label">
        {label}
        {required && <span className="elicit-required" title="required"> *</span>}
      </span>
      {input}
      {prop.description && <span className="panel-note">{prop.description}</span>}
      {error && <span className="elicit-field-error">{error}</span>}
    </label>
  );
}

function Question({ agent, question }) {
  const [raw, setRaw] = useState({});
  const [errors, setErrors] = useState({});
  const reply = (action, content) => agent.send(JSON.stringify({ type: `${PREFIX}_response`, id: question.id, action, ...(content ? { content } : {}) }));

  function submit(event) {
    event.preventDefault();
    const checked = checkAnswer(question.requestedSchema, raw);
    setErrors(checked.errors ?? {});
    if (checked.content) reply("accept", checked.content);
  }

  return (
    <form className="tool tool-approval-requested elicitation" data-testid="elicitation" data-id={question.id} onSubmit={submit} noValidate>
      <div className="tool-head">
        <span className="tool-name">{question.serverName}</span>
        <span className="tool-where">asks</span>
        <span className="tool-state">needs input</span>
      </div>
      <p className="elicit-message">{question.message}</p>
      {fields(question.requestedSchema).map(([name, prop, required]) => (
        <Field key={name} name={name} prop={prop} required={required} value={raw[name]} error={errors[name]} onChange={(v) => setRaw((r) => ({ ...r, [name]: v }))} />
      ))}
      {question.error && <div className="status bad" data-testid="elicitation-error">{question.error}</div>}
      <div className="tool-actions">
        <button type="submit" className="approve">Submit</button>
        <button type="button" className="deny" onClick={() => reply("decline")}>Decline</button>
        <button type="button" onClick={() => reply("cancel")}>Cancel</button>
      </div>
    </form>
  );
}

/** The pending questions of MCP servers, followed from the agent socket. */
export function Elicitations({ agent }) {
  const [questions, setQuestions] = useState([]);
  useEffect(() => {
    // The agent re-sends every pending question to a connecting tab, so a reconnect starts over.
    const onOpen = () => setQuestions([]);
    const onMessage = (message) => {
      if (typeof message.data !== "string" || !message.data.includes(PREFIX)) return;
      let frame;
      try {
        frame = JSON.parse(message.data);
      } catch {
        return;
      }
      if (frame.type === PREFIX) setQuestions((qs) => [...qs.filter((q) => q.id !== frame.id), frame]);
      else if (frame.type === `${PREFIX}_error`) setQuestions((qs) => qs.map((q) => (q.id === frame.id ? { ...q, error: frame.error } : q)));
      else if (frame.type === `${PREFIX}_resolved`) setQuestions((qs) => qs.filter((q) => q.id !== frame.id));
    };
    agent.addEventListener("open", onOpen);
    agent.addEventListener("message", onMessage);
    return () => {
      agent.removeEventListener("open", onOpen);
      agent.removeEventListener("message", onMessage);
    };
  }, [agent]);
  if (questions.length === 0) return null;
  return (
    <div className="elicitations" data-testid="elicitations">
      {questions.map((q) => (
        <Question key={q.id} agent={agent} question={q} />
      ))}
    </div>
  );
}
