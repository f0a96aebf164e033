// Mermaid (3.5 MB) only on pages that have a diagram, also after an instant navigation.
// Material draws `pre.mermaid` blocks itself, with a global `mermaid` if one exists (else it asks a CDN):
// it calls mermaid.initialize(config) once, then mermaid.render(id, text) per diagram. This stand-in
// takes both calls and loads the committed library (pinned in package.json) on the first render.
(() => {
  if (typeof window.mermaid !== "undefined") return;
  const src = new URL("../assets/vendor/mermaid/mermaid.min.js", document.currentScript.src).href;
  let config = {};
  let library = null;
  const load = () => library ||= new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.src = src;
    script.onload = () => {
      const real = window.mermaid;  // the library replaces this stand-in on the global
      real.initialize(config);
      resolve(real);
    };
    script.onerror = () => reject(new Error(`could not load ${src}`));
    document.head.appendChild(script);
  });
  window.mermaid = {
    initialize: (c) => { config = {...c, startOnLoad: false}; },
    render: async (id, text) => (await load()).render(id, text),
  };
})();
