// TypeDoc plugin (typedoc.json "plugin"): the fields of Triton's own messages.
//
// ModelConfig (lib/model-config.ts) and the statistics records
// (lib/observability/statistics.ts) are zod schemas with Triton's field names,
// field for field: their documentation is Triton's (model_config.proto, the
// statistics extension). TypeDoc expands the inferred types wherever they are
// used; a field of those files that has no comment of its own gets one that
// says so, and the members of a zod enum's value table are described as the
// value they name. Every other symbol must carry its own TSDoc comment.
import { Comment, Converter, ReflectionKind } from 'typedoc';

const MIRRORED = [
  ['lib/model-config.ts', "Triton's model configuration field of this name (model_config.proto, `ModelConfig`)."],
  ['lib/observability/statistics.ts', "Triton's statistics field of this name (the statistics extension's JSON)."],
];

/** @param {import('typedoc').Application} app */
export function load(app) {
  app.converter.on(Converter.EVENT_CREATE_DECLARATION, (_context, reflection) => {
    if (reflection.comment || !reflection.kindOf(ReflectionKind.Property)) return;
    if (reflection.parent?.name !== '__type') return;
    const file = reflection.sources?.[0]?.fileName ?? '';
    const mirrored = MIRRORED.find(([path]) => file.endsWith(path));
    if (mirrored) {
      reflection.comment = new Comment([{ kind: 'text', text: mirrored[1] }]);
      return;
    }
    // z.enum([...])'s `enum` table: each key is the value it names.
    if (reflection.sources === undefined || reflection.sources.length === 0 || file.includes('node_modules/zod')) {
      reflection.comment = new Comment([{ kind: 'text', text: `The value \`${reflection.name}\`.` }]);
    }
  });
}
