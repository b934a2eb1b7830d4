// Console behaviour that would otherwise be inline handlers, which the
// Content-Security-Policy (script-src 'self') does not run.
document.addEventListener("change", (event) => {
  // <select data-autosubmit>: submit its form on change (the tenant switcher).
  const target = event.target;
  if (target instanceof HTMLSelectElement && target.hasAttribute("data-autosubmit") && target.form) {
    target.form.submit();
  }
});

document.addEventListener("submit", (event) => {
  // <button data-confirm="..."> (or <form data-confirm>): ask before submitting.
  const form = event.target;
  const button = event.submitter;
  const question = (button && button.dataset.confirm) || (form instanceof HTMLElement && form.dataset.confirm);
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});
