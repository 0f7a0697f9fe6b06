// PDF files made on the fly (no PDF library): pages of text in Helvetica (one of the PDF's
// standard fonts, so nothing is embedded) and raster figures as Flate-compressed RGB image
// XObjects, with a correct cross-reference table. reading.e2e.mjs (b) reads a 10-page one with two
// figures; bench/reading.mjs times a 100-page one.

import zlib from 'node:zlib';

/** PDF string literal of `s` (ASCII; parentheses and backslashes escaped). */
function lit(s) {
  return `(${String(s).replace(/[\\()]/g, (c) => `\\${c}`)})`;
}

/** A deterministic figure: a colour gradient with a dark frame and a diagonal, `w`×`h` RGB. */
function figurePixels(w, h, hue) {
  const px = Buffer.alloc(w * h * 3);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const i = (y * w + x) * 3;
      const edge = x < 3 || y < 3 || x >= w - 3 || y >= h - 3 || Math.abs(x * h - y * w) < w * 2;
      px[i] = edge ? 20 : (x * 255) / w;
      px[i + 1] = edge ? 20 : (hue + (y * 255) / h) % 256;
      px[i + 2] = edge ? 60 : 255 - (x * 255) / w;
    }
  }
  return px;
}

/**
 * The sentences of page `n` (each page's own, so order and completeness can be checked).
 * @param {number} n 1-based page number
 */
export function pageSentences(n) {
  return [
    `Section ${n}: observations of the harbour, part ${n}.`,
    `Paragraph ${n}.1 says the tide rose ${n * 3} centimetres above the mark.`,
    `Paragraph ${n}.2 records that ${n + 1} boats came home before dawn.`,
    `Closing line of page ${n}, written by the keeper.`,
  ];
}

/**
 * A PDF document.
 * @param {{pages: number, figures?: Array<{page: number, width: number, height: number}>, title?: string, author?: string, linesPerPage?: number}} o
 *   `figures`: images (pixels `width`×`height`) drawn on the given pages under the text;
 *   `linesPerPage`: filler lines after each page's sentences (a denser page)
 * @returns {Buffer}
 */
export function makePdf({ pages, figures = [], title = 'Harbour observations', author = 'The Keeper', linesPerPage = 0 }) {
  const objects = []; // [number, body Buffer]
  const add = (body) => {
    objects.push(Buffer.isBuffer(body) ? body : Buffer.from(body, 'latin1'));
    return objects.length;
  };
  const catalog = add(''); // filled below
  const pagesObj = add('');
  const font = add('<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>');
  const info = add(`<< /Title ${lit(title)} /Author ${lit(author)} /CreationDate (D:20261130071500Z) /Producer (keepsake tests) >>`);
  const kids = [];
  for (let n = 1; n <= pages; n++) {
    const mine = figures.filter((f) => f.page === n);
    const images = mine.map((f, i) => {
      const raw = zlib.deflateSync(figurePixels(f.width, f.height, (n * 40 + i * 90) % 256));
      const head = `<< /Type /XObject /Subtype /Image /Width ${f.width} /Height ${f.height} /ColorSpace /DeviceRGB /BitsPerComponent 8 /Filter /FlateDecode /Length ${raw.length} >>\nstream\n`;
      return add(Buffer.concat([Buffer.from(head, 'latin1'), raw, Buffer.from('\nendstream', 'latin1')]));
    });
    let ops = 'BT /F1 18 Tf 72 740 Td 22 TL\n';
    const lines = [...pageSentences(n)];
    for (let i = 0; i < linesPerPage; i++) lines.push(`Line ${i + 1} of page ${n}: the lamp, the tide table and the logbook are checked again.`);
    ops += `${lit(lines[0])} Tj /F1 11 Tf 16 TL\n`;
    for (const l of lines.slice(1)) ops += `T* ${lit(l)} Tj\n`;
    ops += 'ET\n';
    // figures below the text, one above the other
    mine.forEach((f, i) => {
      const w = 240;
      const h = Math.round((w * f.height) / f.width);
      ops += `q ${w} 0 0 ${h} 72 ${380 - i * (h + 20)} cm /Im${i} Do Q\n`;
    });
    const content = Buffer.from(ops, 'latin1');
    const contentObj = add(Buffer.concat([Buffer.from(`<< /Length ${content.length} >>\nstream\n`, 'latin1'), content, Buffer.from('\nendstream', 'latin1')]));
    const xobjects = images.length ? ` /XObject << ${images.map((o, i) => `/Im${i} ${o} 0 R`).join(' ')} >>` : '';
    kids.push(add(`<< /Type /Page /Parent ${pagesObj} 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 ${font} 0 R >>${xobjects} >> /Contents ${contentObj} 0 R >>`));
  }
  objects[catalog - 1] = Buffer.from(`<< /Type /Catalog /Pages ${pagesObj} 0 R >>`, 'latin1');
  objects[pagesObj - 1] = Buffer.from(`<< /Type /Pages /Kids [${kids.map((k) => `${k} 0 R`).join(' ')}] /Count ${kids.length} >>`, 'latin1');

  const parts = [Buffer.from('%PDF-1.7\n%\xe2\xe3\xcf\xd3\n', 'latin1')];
  let offset = parts[0].length;
  const offsets = [];
  objects.forEach((body, i) => {
    const obj = Buffer.concat([Buffer.from(`${i + 1} 0 obj\n`, 'latin1'), body, Buffer.from('\nendobj\n', 'latin1')]);
    offsets.push(offset);
    offset += obj.length;
    parts.push(obj);
  });
  let xref = `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`;
  for (const o of offsets) xref += `${String(o).padStart(10, '0')} 00000 n \n`;
  xref += `trailer\n<< /Size ${objects.length + 1} /Root ${catalog} 0 R /Info ${info} 0 R >>\nstartxref\n${offset}\n%%EOF\n`;
  parts.push(Buffer.from(xref, 'latin1'));
  return Buffer.concat(parts);
}
