// graphile-worker 0.17, driven for the graphile_worker preset test through its API:
//   node graphile.js install DSN              its migrations
//   node graphile.js add DSN JOBS             JOBS: JSON [{task, queueName, runInSeconds,
//                                             maxAttempts}]; prints ids
//   node graphile.js once DSN                 run every job that can run now, then exit
//   node graphile.js hold DSN                 a worker (one job at a time) until killed
//   node graphile.js cron DSN CRONTAB         a worker with CRONTAB (its crontab
//                                             file's lines) until killed
// Tasks: ok returns, boom throws, block never returns.
'use strict'
const { Logger, makeWorkerUtils, run, runMigrations, runOnce } = require('graphile-worker')

// Silent: stdout carries only the ids this script prints.
const logger = new Logger(() => () => {})

const taskList = {
  ok: async () => {},
  boom: async () => { throw new Error('boom') },
  block: () => new Promise(() => {})
}

async function main () {
  const [command, connectionString, ...rest] = process.argv.slice(2)
  const options = {
    connectionString, concurrency: 1, noHandleSignals: true, pollInterval: 200, logger
  }
  if (command === 'install') {
    await runMigrations(options)
  } else if (command === 'add') {
    const utils = await makeWorkerUtils({ connectionString, logger })
    const ids = []
    for (const spec of JSON.parse(rest[0])) {
      const runAt = spec.runInSeconds ? new Date(Date.now() + spec.runInSeconds * 1000) : undefined
      const job = await utils.addJob(spec.task, {}, {
        queueName: spec.queueName, runAt, maxAttempts: spec.maxAttempts
      })
      ids.push(job.id)
    }
    await utils.release()
    console.log(JSON.stringify(ids))
  } else if (command === 'once') {
    await runOnce({ ...options, taskList })
  } else if (command === 'cron') {
    const runner = await run({ ...options, taskList, crontab: rest[0] })
    await runner.promise
  } else if (command === 'hold') {
    const runner = await run({ ...options, taskList })
    runner.events.on('job:start', ({ job }) => console.log(JSON.stringify([job.id])))
    await runner.promise
  } else {
    throw new Error(`unknown command ${command}`)
  }
}

main().catch((error) => { console.error(error); process.exit(1) })
