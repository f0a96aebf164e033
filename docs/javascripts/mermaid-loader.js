// Mermaid only on pages that have a diagram, also after an instant navigation, and only the parts
// those diagrams need (mermaid's ES-module build fetches a diagram type's code on first use).
// Material draws `pre.mermaid` blocks itself, with a global `mermaid` if one exists (else it asks a CDN):
// it calls mermaid.initialize(config) once, then mermaid.render(id, text) per diagram. This stand-in
// takes both calls and imports the committed library (pinned in package.json) on the first render.
(() => {
  if (typeof window.mermaid !== "undefined") return;
  const src = new URL("../assets/vendor/mermaid/mermaid.esm.min.mjs", document.currentScript.src).href;
  let config = {};
  let library = null;
  const load = () => library ||= import(src).then(({ default: real }) => {
    real.initialize(config);
    return real;
  });
  window.mermaid = {
    initialize: (c) => { config = { ...c, startOnLoad: false }; },
    render: async (id, text) => (await load()).render(id, text),
  };
})();
