// The page's access token from the development issuer (POST /auth/token): get one, show its
// countdown, and answer a stream's `challenge` events with a fresh token (SPEC 4.3).
(() => {
  const panel = document.getElementById("token-panel");
  const $ = (id) => document.getElementById(id);
  let current = null;  // the issuer's JSON answer: access_token, expires_at, identity, roles
  let answered = 0;

  function status(text) { if ($("token-status")) $("token-status").textContent = `${new Date().toLocaleTimeString()} ${text}`; }

  async function issue() {
    if (!panel || panel.dataset.signedIn !== "1") throw new Error("sign in to get a token");
    const roles = $("token-roles").value.split(/[\s,]+/).filter(Boolean);
    const lifetime = parseInt($("token-lifetime").value, 10);
    const response = await fetch("/auth/token", {
      method: "POST",
      credentials: "same-origin",
      headers: {"content-type": "application/json", "x-csrftoken": $("token-csrf").value},
      body: JSON.stringify({roles, lifetime}),
    });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(body.detail || `token refused (${response.status})`);
    current = body;
    status(`token for ${body.identity}, ${body.expires_in}s`);
    tick();
    return body.access_token;
  }

  function tick() {
    if (!current || !$("token-expiry")) return;
    const left = Math.round(current.expires_at - Date.now() / 1000);
    $("token-expiry").textContent = left > 0 ? `${left}s` : "expired";
    $("token-expiry").dataset.left = String(left);
  }

  // The challenge response: the request the challenge event describes (method and headers,
  // SPEC 4.3), sent to the stream's own URL with the new token in the authorization header.
  async function answer(path, challenge) {
    let asked = {};
    try { asked = JSON.parse(challenge.data || "{}"); } catch { /* the defaults below */ }
    const token = await issue();
    const response = await fetch(path, {
      method: asked.method || "POST",
      headers: {...(asked.headers || {}), authorization: `Bearer ${token}`},
    });
    if (response.status !== 204) {
      const body = await response.json().catch(() => ({}));
      throw new Error(`challenge response refused: ${response.status} ${body.reason || body.error || ""}`);
    }
    answered += 1;
    $("challenges-answered").textContent = String(answered);
    status("challenge answered");
  }

  // A page that brings its own token source (its identity provider's SDK, say) sets
  // window.sluiceToken before this script; it is left alone.
  if (window.sluiceToken) return;
  window.sluiceToken = {
    current: () => (current ? current.access_token : null),
    expiresAt: () => (current ? current.expires_at : null),
    answered: () => answered,
    signedIn: () => Boolean(panel && panel.dataset.signedIn === "1"),
    issue,
    // The stream URL with the token (EventSource cannot send headers), resuming at lastId if given.
    url(path, lastId) {
      const query = new URLSearchParams();
      if (current) query.set("access_token", current.access_token);
      if (lastId) query.set("lastEventId", lastId);
      const text = query.toString();
      return text ? `${path}${path.includes("?") ? "&" : "?"}${text}` : path;
    },
    attach(source, path) {
      source.addEventListener("challenge", (event) => answer(path, event).catch((error) => status(error.message)));
    },
  };
  if (panel && $("token-get")) $("token-get").onclick = () => issue().catch((error) => status(error.message));
  setInterval(tick, 250);
})();
