// Makes examples/images/*.jpg, the synthetic pictures examples/pipeline.ts
// and the service tests classify (drawn as SVG, encoded by sharp; no photo
// of anyone's). Run again to regenerate:
//
//   node --import tsx examples/images/generate.ts
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';

const here = fileURLToPath(new URL('.', import.meta.url));

// A blue sky over a strip of green with a small yellow sun: mostly blue.
const sky = `<svg xmlns="http://www.w3.org/2000/svg" width="320" height="240">
  <defs><linearGradient id="sky" x1="0" y1="0" x2="0" y2="1">
    <stop offset="0" stop-color="#1f3fd8"/><stop offset="1" stop-color="#3a5ee0"/>
  </linearGradient></defs>
  <rect width="320" height="240" fill="url(#sky)"/>
  <rect y="200" width="320" height="40" fill="#2f9a38"/>
  <circle cx="250" cy="60" r="22" fill="#f2e028"/>
</svg>`;

// An orange square on a lighter orange background: orange.
const orange = `<svg xmlns="http://www.w3.org/2000/svg" width="200" height="150">
  <rect width="200" height="150" fill="#f59a1c"/>
  <rect x="60" y="35" width="80" height="80" fill="#e8801a"/>
</svg>`;

for (const [name, svg] of [['sky', sky], ['orange', orange]] as const) {
  await sharp(Buffer.from(svg)).jpeg({ quality: 85 }).toFile(`${here}${name}.jpg`);
  console.log(`${here}${name}.jpg`);
}
