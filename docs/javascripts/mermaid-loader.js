// Mermaid only on pages that have a diagram, also after an instant navigation, and only the parts
// those diagrams need (mermaid's ES-module build fetches a diagram type's code on first use).
// Material draws `pre.mermaid` blocks itself, with a global `mermaid` if one exists (else it asks a CDN):
// it calls mermaid.initialize(config) once, then mermaid.render(id, text) per diagram. This stand-in
// takes both calls and imports the committed library (pinned in package.json) when a diagram first
// enters the viewport (or the page is printed): a reader who never scrolls to it
// downloads and runs none of mermaid's ~300 kB.
(() => {
  if (typeof window.mermaid !== "undefined") return;
  const src = new URL("../assets/vendor/mermaid/mermaid.esm.min.mjs", document.currentScript.src).href;
  let config = {};
  let library = null;
  const load = () => library ||= import(src).then(({ default: real }) => {
    real.initialize(config);
    return real;
  });
  // Resolves once any diagram of the current page is in the viewport; a new page (instant
  // navigation) gets a new watch, and none is needed once the library is in.
  let near = null;
  const nearby = () => {
    if (library) return library;
    if (near && near.page === location.pathname) return near.promise;
    const promise = new Promise((resolve) => {
      const observer = new IntersectionObserver((entries) => {
        if (entries.some((e) => e.isIntersecting)) { observer.disconnect(); resolve(); }
      });
      document.querySelectorAll("pre.mermaid").forEach((el) => observer.observe(el));
      window.addEventListener("beforeprint", () => { observer.disconnect(); resolve(); }, { once: true });
    });
    near = { page: location.pathname, promise };
    return promise;
  };
  window.mermaid = {
    initialize: (c) => { config = { ...c, startOnLoad: false }; },
    // Drawn once a diagram is near, and never narrower than the width at which its 16 px labels draw at
    // 11 px: a wide diagram on a phone scrolls sideways inside its box (extra.css) instead of shrinking
    // its text to a few pixels.
    render: async (id, text) => {
      await nearby();
      const out = await (await load()).render(id, text);
      const width = /viewBox="[-\d.]+ [-\d.]+ ([\d.]+)/.exec(out.svg);
      if (width) out.svg = out.svg.replace('style="', `style="min-width: ${Math.ceil(width[1] * 11 / 16)}px; `);
      return out;
    },
  };
})();
