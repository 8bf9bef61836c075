// The dashboard's write token, when it has one (bound beyond loopback): the page is
// opened as /#token=..., the token is kept in this tab's sessionStorage (the address
// loses it at once) and sent as "Authorization: Bearer" with the page's own writes.
// A cross-site page cannot read it, so it cannot send it.
(() => {
  const KEY = "qmf-dashboard-token";
  const found = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (found) {
    sessionStorage.setItem(KEY, decodeURIComponent(found[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
  const token = sessionStorage.getItem(KEY);
  if (!token) return;
  const plainFetch = window.fetch.bind(window);
  window.fetch = (resource, options = {}) => {
    const method = (options.method || "GET").toUpperCase();
    const local = typeof resource === "string" && resource.startsWith("/") && !resource.startsWith("//");
    if (local && method !== "GET" && method !== "HEAD") {
      const headers = new Headers(options.headers || {});
      headers.set("Authorization", `Bearer ${token}`);
      options = { ...options, headers };
    }
    return plainFetch(resource, options);
  };
})();
