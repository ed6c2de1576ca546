// What the page does with the text in the box, the way the Python package treats a line (chapter 15's
// `encode_lines`): a blank line is not translated (its translation is ""), and a sentence longer than the
// model's positional table is cut to its first max_len - 2 tokens, with a message that says so.
// No dependencies: tests/test_nothing_lost.py runs these functions with node, the browser test on the page.

export const isBlank = (text) => text.trim() === '';

// the source ids <s> … </s>, cut to `maxLen` (</s> kept last), and whether they were cut
export function sourceIds(tokenIds, { bos, eos, maxLen }) {
  let ids = [bos, ...tokenIds, eos];
  const cut = Boolean(maxLen) && ids.length > maxLen;
  if (cut) ids = ids.slice(0, maxLen - 1).concat([eos]);
  return { ids, cut };
}

// the package's warning, without its line number (the box holds one sentence)
export const cutMessage = (maxLen) =>
  `the sentence is longer than the model's maximum of ${maxLen} tokens; translating its first ${maxLen - 2}`;

// A heatmap's canvas stays within what a browser draws: browsers refuse a side over about 32,767 device
// pixels, and memory runs out before that; 8,192 per side is safe. Cells shrink for long sentences, and the
// token labels are left out where a cell is too small to read one.
export const MAX_CANVAS_PX = 8192;   // per side, in device pixels
export const LABEL_PX = 240;         // room for the token labels (longer ones are clipped)
export function heatmapLayout(nRows, nCols, dpr = 1) {
  const n = Math.max(nRows, nCols, 1);
  const cell = Math.max(1, Math.min(18, Math.floor((MAX_CANVAS_PX / dpr - LABEL_PX - 4) / n)));
  return { cell, labels: cell >= 8 };
}
