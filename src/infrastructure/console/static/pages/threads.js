import { empty, pageHeader, replace } from "../ui.js";

export async function render({ main }) {
  replace(main, pageHeader("Coming soon"), empty("This page is not written yet."));
}
