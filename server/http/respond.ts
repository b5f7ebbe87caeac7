import type { FastifyReply } from 'fastify';

export function noContent(reply: FastifyReply): FastifyReply {
  return reply.code(204).send();
}
