// The demo pages' token panel: a token from the development issuer (POST /auth/token), its
// countdown, and the count of challenges answered. sluice.js opens the streams and calls token().
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

  // Streams are opened with sluice.js (/static/sluice/sluice.js): it asks token() for a fresh token
  // when it opens a stream and when it answers a challenge (SPEC 4.3), and reports each answer here.
  function challenged(result) {
    if (result.answered) {
      answered += 1;
      if ($("challenges-answered")) $("challenges-answered").textContent = String(answered);
      status("challenge answered");
    } else {
      status(`challenge not answered: ${result.error ? result.error.message : "refused"}`);
    }
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
    token: issue,  // the token() callback sluice.js takes
    challenged,  // its onChallenge
  };
  if (panel && $("token-get")) $("token-get").onclick = () => issue().catch((error) => status(error.message));
  setInterval(tick, 250);
})();
