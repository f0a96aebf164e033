// A box that scrolls sideways (a figure, diagram, table or display formula wider than its column: on a phone) gets
// the class `ic-more` while more of it lies past its right edge; stylesheets/extra.css fades that edge, so the reader
// sees that it scrolls. Each box is measured only while it is on screen (IntersectionObserver), then again when its
// size changes (ResizeObserver) or it scrolls: a box further down is not laid out while the page loads
// (content-visibility: auto), and measuring it would lay it out. A CSS scroll-driven animation on every box did the
// same job at about a second of style, layout and paint per lesson on a phone (Lighthouse, lesson 0C).
// Each table's box is also a tab stop. Runs on every page, also after an instant navigation.
(() => {
  const BOXES = ".md-content :is(.course-figure, .course-diagram, .md-typeset__scrollwrap, div.arithmatex)";
  const update = (el) => el.classList.toggle("ic-more", el.scrollLeft + el.clientWidth < el.scrollWidth - 1);
  const sizes = new ResizeObserver((entries) => entries.forEach((entry) => update(entry.target)));
  const shown = new IntersectionObserver((entries) => {
    for (const entry of entries) {
      if (entry.isIntersecting) {
        update(entry.target);
        sizes.observe(entry.target);
      } else {
        sizes.unobserve(entry.target);
      }
    }
  });
  const onScroll = (event) => {
    if (event.target instanceof Element && event.target.matches(BOXES)) update(event.target);
  };
  document.addEventListener("scroll", onScroll, { capture: true, passive: true });
  const scan = () =>
    document.querySelectorAll(BOXES).forEach((el) => {
      // a table's box is a tab stop, as Material makes every code block: a keyboard scrolls it too (axe's
      // scrollable-region-focusable); set without measuring, so no box is laid out early
      if (el.matches(".md-typeset__scrollwrap")) el.tabIndex = 0;
      shown.observe(el);
    });
  // after Material's own handlers for the page (they wrap each table in its scroll box)
  if (typeof window.document$ !== "undefined") window.document$.subscribe(() => requestAnimationFrame(scan));
  else scan();
})();
