// The calculators (ADR-0008): a page holds a placeholder `<div class="ic-calc" data-calc="memory">`;
// this stand-in imports the calculator's code (calc/ui.js, calc/formulas.js) and the registry's facts
// (assets/calc/registry.json, written at build time) only when a placeholder comes near the viewport or
// the reader moves focus into it, so a page that holds one stays as light as any other until then.
// Runs on every page Material shows, also after an instant navigation (document$).
(() => {
  const base = document.currentScript.src;
  const ui = new URL("calc/ui.js", base).href;
  const registry = new URL("../assets/calc/registry.json", base).href;
  let loaded = null;
  const load = () => loaded ||= Promise.all([import(ui), fetch(registry).then((r) => r.json())]);
  // A link to a place below a calculator (/calculators/#spec): each calculator that mounts above it grows the
  // page and would carry the place out of view (and Material's navigation.tracking would then rewrite the
  // address to the section now in view). Until the reader scrolls, keep the linked place where it was.
  let target = null;
  const release = () => { target = null; };
  for (const kind of ["wheel", "touchstart", "keydown", "mousedown"]) addEventListener(kind, release, { passive: true });
  const keepTarget = () => { if (target) target.scrollIntoView(); };
  const mount = (el) => {
    if (el.dataset.state) return;
    el.dataset.state = "loading";
    load().then(([mod, reg]) => { mod.mount(el, reg); keepTarget(); }).catch((e) => {
      el.dataset.state = "failed";
      el.textContent = `The calculator could not load (${e.message}); reload the page to try again.`;
    });
  };
  const scan = () => {
    target = location.hash ? document.getElementById(decodeURIComponent(location.hash.slice(1))) : null;
    const placeholders = document.querySelectorAll(".ic-calc:not([data-state])");
    if (!placeholders.length) return;
    const observer = new IntersectionObserver((entries) => {
      for (const e of entries) if (e.isIntersecting) { observer.unobserve(e.target); mount(e.target); }
    }, { rootMargin: "400px 0px" });
    placeholders.forEach((el) => {
      observer.observe(el);
      el.addEventListener("focusin", () => mount(el), { once: true });
      el.addEventListener("click", () => mount(el), { once: true });
    });
  };
  if (typeof window.document$ !== "undefined") window.document$.subscribe(scan);
  else scan();
})();
