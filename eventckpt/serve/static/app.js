// eventckpt serve: keyboard navigation, tree expand/collapse and copy buttons. Everything else is plain
// links and forms rendered by the server; nothing here builds markup from data.
"use strict";

document.addEventListener("keydown", (event) => {
  if (event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
  const target = event.target;
  if (target && (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName))) return;
  const rel = { ArrowLeft: "prev", j: "prev", ArrowRight: "next", k: "next" }[event.key];
  if (!rel) return;
  const link = document.querySelector(`nav.steps a[rel="${rel}"]`) || document.querySelector(`.pager a[rel="${rel}"]`);
  if (link) {
    event.preventDefault();
    window.location.assign(link.href);
  }
});

document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-tree], button[data-copy]");
  if (!button) return;
  if (button.dataset.tree) {
    const open = button.dataset.tree === "open";
    for (const details of document.querySelectorAll("section.state details")) details.open = open;
    return;
  }
  const source = document.getElementById(button.dataset.copy);
  if (!source) return;
  const text = source.textContent;
  const select = () => {
    const range = document.createRange();
    range.selectNodeContents(source);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  };
  const done = () => { button.textContent = "copied"; setTimeout(() => { button.textContent = "copy"; }, 1500); };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(text).then(done, () => { select(); button.textContent = "selected"; });
  } else {
    select();
    button.textContent = "selected";
  }
});
